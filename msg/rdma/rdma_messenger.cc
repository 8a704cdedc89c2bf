// RdmaMessenger: device selection, listener and accepted sessions, Connect, Shutdown.
#include "msg/rdma/rdma_messenger.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "msg/rdma/event_loop.h"
#include "msg/ring/ring.h"
#include "msg/session/handshake_steps.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {
namespace {

uint32_t OptionU32(const MessengerOptions& o, const std::string& key, uint32_t def) {
  auto it = o.backend_options.find(key);
  uint32_t v = 0;
  if (it == o.backend_options.end() || !absl::SimpleAtoi(it->second, &v)) return def;
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Messenger>> RdmaMessenger::Create(const MessengerOptions& options,
                                                                 Dispatcher* dispatcher) {
  if (dispatcher == nullptr) return absl::InvalidArgumentError("dispatcher is required");
  auto shared = std::make_shared<RdmaShared>();
  shared->options = options;
  shared->dispatcher = dispatcher;
  std::string device;
  if (auto it = options.backend_options.find("rdma_device"); it != options.backend_options.end()) {
    device = it->second;
  }
  if (const char* env = std::getenv("MSGR_RDMA_DEVICE"); env != nullptr && *env != '\0') {
    device = env;
  }
  verbs::DeviceOptions dev_options;
  dev_options.soft_async_event_delay =
      absl::Microseconds(OptionU32(options, "rdma_soft_async_event_delay_us", 0));
  auto dev = verbs::OpenDevice(device, dev_options);
  if (!dev.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "rdma messenger: cannot open RDMA device '", device.empty() ? "(auto)" : device,
        "': ", dev.status().message(), " (use rdma_device=soft without RDMA hardware)"));
  }
  auto ctx = std::make_shared<DeviceContext>();
  ctx->device = std::move(*dev);
  shared->soft_device = ctx->device->attr().provider == "soft";
  auto pd = ctx->device->CreatePd();
  if (!pd.ok()) return pd.status();
  ctx->pd = std::move(*pd);
  shared->ctx = ctx;
  TransportConfig& t = shared->transport;
  t.recv_buffers = OptionU32(options, "rdma_recv_buffers", t.recv_buffers);
  t.buffer_bytes = OptionU32(options, "rdma_buffer_bytes", t.buffer_bytes);
  t.send_buffers = OptionU32(options, "rdma_send_buffers", t.send_buffers);
  t.sq_depth = OptionU32(options, "rdma_sq_depth", t.sq_depth);
  t.signal_every = OptionU32(options, "rdma_signal_every", t.signal_every);
  shared->cq_spin = absl::Microseconds(OptionU32(options, "rdma_cq_spin_us", 20));
  shared->app_poll_window_ns =
      int64_t{1000} * OptionU32(options, "rdma_app_poll_window_us", 200);
  shared->inject_out_of_ring_write = OptionU32(options, "rdma_inject_out_of_ring_write", 0);
  shared->zero_copy_min_bytes = OptionU32(options, "rdma_zero_copy_min_bytes", 256 * 1024);
  shared->cutoff_ban = absl::Seconds(OptionU32(options, "rdma_cutoff_ban_s", 60));
  // Record notifications (PROTOCOL.md): an OSD asks for one notifier per poller
  // ("rdma_ring_notifiers"); a client announces its records WITH_IMM where the server
  // offers it ("rdma_record_imm", default on).
  shared->record_imm = OptionU32(options, "rdma_record_imm", 1) != 0;
  for (uint32_t i = 0, n = OptionU32(options, "rdma_ring_notifiers", 0); i < n; ++i) {
    auto notifier = RdmaRingNotifier::Create(ctx, static_cast<int>(i),
                                             OptionU32(options, "rdma_notifier_cq_depth", 16384),
                                             t.recv_buffers);
    if (!notifier.ok()) return notifier.status();
    shared->notifiers.push_back(std::move(*notifier));
  }
  if (!IsValidRingSize(options.ring_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("ring_bytes ", options.ring_bytes,
                                                   " must be a power of two and at least ",
                                                   kMinRingBytes));
  }
  shared->ring_min_bytes =
      size_t{OptionU32(options, "rdma_ring_min_kb",
                       static_cast<uint32_t>(shared->ring_min_bytes >> 10))}
      << 10;
  shared->ring_min_bytes = std::min(shared->ring_min_bytes, options.ring_bytes);
  if (!IsValidRingSize(shared->ring_min_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rdma_ring_min_kb ", shared->ring_min_bytes >> 10,
        " must be a power of two of at least ", kMinRingBytes >> 10, " KiB"));
  }
  shared->ring_shrink_idle =
      absl::Seconds(OptionU32(options, "rdma_ring_shrink_idle_s", 30));
  shared->budget = RegisteredBudget::Create(
      uint64_t{OptionU32(options, "rdma_max_registered_mb",
                         static_cast<uint32_t>(kDefaultMaxRegisteredBytes >> 20))}
      << 20);
  shared->buffers = RecordBufferPool::Create(
      ctx, shared->budget, &shared->counters,
      size_t{OptionU32(options, "rdma_record_buffer_cache_mb", 64)} << 20);
  // One completion thread for every messenger of the process (event_loop.h), unless
  // rdma_shared_loop=0 gives this one its own.
  //
  // A client's completion thread collects its acknowledgements, one thread however many
  // clients the process runs: a fixed spin after work finds a -t 1 write's ack at once.
  // Adaptive there (it sleeps when most spins run out) gave twice the p50 and 0.7x the
  // IOPS at -t 16, the same with 60 clients (docs/BENCHMARKS.md "Session 28"). An OSD's
  // stays adaptive.
  const bool adaptive =
      OptionU32(options, "rdma_cq_spin_adaptive",
                options.name.type == EntityType::kClient ? 0 : 1) != 0;
  auto loop = OptionU32(options, "rdma_shared_loop", 1) != 0
                  ? EventLoop::CreateShared(shared->cq_spin, adaptive)
                  : EventLoop::Create(shared->cq_spin, adaptive);
  if (!loop.ok()) return loop.status();
  shared->loop = std::move(*loop);
  shared->workers = std::make_unique<Workers>(std::max(1, options.worker_threads));
  shared->setup = std::make_unique<Workers>(1, "ms-rdma-setup");
  std::unique_ptr<RdmaMessenger> m(new RdmaMessenger(shared));
  {
    absl::MutexLock l(&shared->hooks_mu);
    RdmaMessenger* raw = m.get();
    shared->forget_session = [raw](const RdmaConnection* c) { raw->ForgetSession(c); };
    shared->drain_async_events = [raw] { raw->OnAsyncEvents(); };
  }
  // The device's asynchronous events: a peer that broke our memory protection is cut off.
  if (auto s = shared->loop->WatchFd(ctx->device->async_fd(),
                                     [raw = m.get()] { raw->OnAsyncEvents(); });
      !s.ok()) {
    return s;
  }
  // Lossless sessions whose client is gone end after session_reconnect_timeout.
  // So do handshakes that did not finish within handshake_timeout.
  shared->loop->SetTick([raw = m.get()] { raw->ExpireSessions(); },
                        std::min({absl::Seconds(1), options.session_reconnect_timeout / 4,
                                  options.handshake_timeout / 4}));
  spdlog::info("msgr rdma: {} messenger on device {} (provider {})", options.name.ToString(),
               ctx->device->attr().name, ctx->device->attr().provider);
  return std::unique_ptr<Messenger>(std::move(m));
}

RdmaMessenger::~RdmaMessenger() { Shutdown(); }

const std::string& RdmaMessenger::device_name() const {
  return shared_->ctx->device->attr().name;
}

absl::StatusOr<std::string> RdmaMessenger::Bind(const std::string& addr) {
  absl::MutexLock l(&mu_);
  if (shut_down_) return absl::FailedPreconditionError("messenger is shut down");
  if (listener_) return absl::AlreadyExistsError("already bound to " + listener_->addr());
  auto listener = Listener::Listen(addr);
  if (!listener.ok()) return listener.status();
  listener_ = std::move(*listener);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return listener_->addr();
}

void RdmaMessenger::AcceptLoop() {
  for (;;) {
    auto ch = listener_->Accept();
    if (!ch.ok()) {
      if (!absl::IsCancelled(ch.status())) {
        spdlog::error("msgr rdma: accept failed: {}", ch.status().ToString());
      }
      return;
    }
    auto a = std::make_shared<Accepting>(this, std::move(*ch));
    {
      absl::MutexLock l(&mu_);
      if (shut_down_) return;
      accepting_[a.get()] = a;
    }
    if (absl::Status s = shared_->loop->Add(a); !s.ok()) {
      spdlog::warn("msgr rdma: cannot serve the connection from {}: {}", a->peer(),
                   s.ToString());
      absl::MutexLock l(&mu_);
      accepting_.erase(a.get());
    }
  }
}

RdmaMessenger::Accepting::Accepting(RdmaMessenger* m, std::unique_ptr<SideChannel> ch)
    : m_(m),
      ch_(std::move(ch)),
      fd_(ch_->fd()),
      peer_(ch_->peer()),
      deadline_(absl::Now() + m->shared_->options.handshake_timeout),
      hs_(m->shared_->options.name, m->shared_->options.auth, peer_) {}

void RdmaMessenger::Accepting::OnSideReadable() {
  if (step_ == Step::kDone) return;
  const absl::Status error = ch_->DrainFrames([this](const DecodedFrame& f) {
    switch (step_) {
      case Step::kHello: {
        auto challenge = hs_.OnHello(f.header, f.payload);
        if (!challenge.ok()) return FailHandshake(), Done(), false;
        if (absl::Status w = ch_->WriteEncoded(*challenge, deadline_); !w.ok()) {
          (void)hs_.OnReadError(w);
          return FailHandshake(), Done(), false;
        }
        step_ = Step::kAuth;
        return true;
      }
      case Step::kAuth:
        if (!OnAuth(f)) return Done(), false;
        step_ = Step::kSetup;
        return true;
      case Step::kSetup:
        if (!conn_->AcceptSetup(*ch_, f, &st_)) return Done(), false;
        step_ = Step::kReady;
        return true;
      case Step::kReady:
        // The channel becomes the link's: this attempt leaves the loop first (the link
        // registers the same socket).
        Done();
        conn_->AcceptFinish(std::move(ch_), f, &st_);
        return false;
      case Step::kDone:
        return false;
    }
    return false;
  });
  if (error.ok() || step_ == Step::kDone) return;
  if (step_ == Step::kHello || step_ == Step::kAuth) {
    (void)hs_.OnReadError(error);
    FailHandshake();
  } else {
    conn_->FailAccept(ch_.get(), st_, error);
  }
  Done();
}

bool RdmaMessenger::Accepting::OnAuth(const DecodedFrame& f) {
  RdmaShared& shared = *m_->shared_;
  auto auth = hs_.OnAuth(f.header, f.payload);
  if (!auth.ok()) return FailHandshake(), false;
  const EntityName peer = hs_.hello().name;
  if (absl::Status fenced = shared.fence.Check(peer, auth->instance); !fenced.ok()) {
    shared.counters.fenced_refusals++;
    (void)hs_.Refuse(fenced, session::Blame::kNone, /*send_close=*/true);
    return FailHandshake(), false;
  }
  // A peer recently cut off for an RDMA access outside its memory is not served yet.
  if (const absl::Time until = shared.BannedUntil(peer); until > absl::Now()) {
    shared.counters.cutoff_refusals++;
    (void)hs_.Refuse(
        absl::PermissionDeniedError(absl::StrCat(
            peer.ToString(), " is not served for another ",
            absl::FormatDuration(absl::Ceil(until - absl::Now(), absl::Seconds(1))),
            ": it made an RDMA access outside the memory it was given (rdma_cutoff_ban_s)")),
        session::Blame::kNone, /*send_close=*/true);
    return FailHandshake(), false;
  }
  bool lossless = (auth->flags & kAuthLossless) != 0;
  const bool want_ring = (auth->flags & kAuthWantRing) != 0;
  std::vector<std::shared_ptr<RdmaConnection>> replaced;
  bool resumed = false;
  absl::Status refused;
  {
    absl::MutexLock l(&m_->mu_);
    if (m_->shut_down_) return false;
    if (auto it = m_->policies_.find(peer.type); it != m_->policies_.end()) {
      lossless = it->second.lossless;
    }
    // msg/session/session_table.h: resume, or a new session that replaces the peer's
    // unlinked ones.
    auto admitted = m_->sessions_.Admit(session::SessionRequest{
        peer, auth->cookie, lossless, (auth->flags & kAuthHadSession) != 0});
    if (!admitted.ok()) {
      refused = admitted.status();
    } else {
      replaced = std::move(admitted->replaced);
      conn_ = std::move(admitted->resume);
      resumed = conn_ != nullptr;
      if (!resumed) {
        conn_ = std::make_shared<RdmaConnection>(m_->shared_, peer, peer_, lossless, want_ring,
                                                 auth->cookie);
        conn_->set_peer_instance(auth->instance);
        m_->sessions_.Insert(conn_);
      }
    }
  }
  if (!refused.ok()) {
    session::CountFailure(session::HandshakeError{refused, session::Blame::kAuth, true},
                          &shared.counters);
    spdlog::warn("msgr rdma: refusing connection from {}: {}", peer_, refused.ToString());
    (void)ch_->WriteClose(refused, absl::Now() + absl::Milliseconds(200));
    return false;
  }
  // Fenced after its handshake was checked and before SetFenced's sweep could see it.
  if (absl::Status fenced = shared.fence.Check(peer, auth->instance); !fenced.ok()) {
    shared.counters.fenced_refusals++;
    (void)ch_->WriteClose(fenced, absl::Now() + absl::Milliseconds(200));
    conn_->Reset(fenced, /*send_close=*/false);
    for (auto& r : replaced) r->Reset(fenced, /*send_close=*/false);
    return false;
  }
  for (auto& r : replaced) r->Reset(session::ReplacedError(peer, peer_), /*send_close=*/false);
  return conn_->AcceptBegin(*ch_, *auth, resumed, &st_);
}

void RdmaMessenger::Accepting::FailHandshake() {
  const session::HandshakeError& e = hs_.last_error();
  session::CountFailure(e, &m_->shared_->counters);
  if (e.send_close) (void)ch_->WriteEncoded(session::CloseFrame(e), deadline_);
  if (e.blame == session::Blame::kNone && !e.send_close) {
    spdlog::info("msgr rdma: handshake with {} ended: {}", hs_.who(), e.why.ToString());
  } else {
    spdlog::warn("msgr rdma: refusing connection from {}: {}", hs_.who(), e.why.ToString());
  }
}

bool RdmaMessenger::Accepting::Expire(absl::Time now) {
  if (step_ == Step::kDone) return true;
  if (now < deadline_) return false;
  const absl::Duration timeout = m_->shared_->options.handshake_timeout;
  if (step_ == Step::kHello || step_ == Step::kAuth) {
    (void)hs_.OnTimeout(timeout);
    FailHandshake();
  } else {
    conn_->FailAccept(ch_.get(), st_,
                      absl::DeadlineExceededError(absl::StrCat(
                          "RDMA setup did not finish within ", absl::FormatDuration(timeout))));
  }
  Done();
  return true;
}

void RdmaMessenger::Accepting::Done() {
  step_ = Step::kDone;
  m_->shared_->loop->Remove(this);
  absl::MutexLock l(&m_->mu_);
  m_->accepting_.erase(this);  // the loop's handler still holds a reference
}

void RdmaMessenger::SetFenced(std::vector<FencedPeer> fenced) {
  std::vector<std::shared_ptr<RdmaConnection>> accepted;
  {
    absl::MutexLock l(&mu_);
    accepted = sessions_.Accepted();
  }
  shared_->counters.fenced_sessions_closed += shared_->fence.SetAndSweep(
      std::move(fenced), accepted, "rdma",
      [](const std::shared_ptr<RdmaConnection>& c, const absl::Status& why) {
        // Revokes the ring's key at once: the peer's HCA (or the soft provider's key
        // check) refuses its next one-sided write into it.
        c->Reset(why, /*send_close=*/true);
      });
}

void RdmaMessenger::ForgetSession(const RdmaConnection* conn) {
  absl::MutexLock l(&mu_);
  if (sessions_.Erase(conn) && conn->outgoing_) RepublishPollListLocked();
}

absl::StatusOr<ConnectionRef> RdmaMessenger::Connect(const std::string& addr,
                                                     const ConnectOptions& options) {
  std::shared_ptr<RdmaConnection> conn;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return absl::FailedPreconditionError("messenger is shut down");
    if (auto open = sessions_.Outgoing(addr)) return ConnectionRef(open);
    conn = std::make_shared<RdmaConnection>(shared_, addr, options);
    sessions_.InsertOutgoing(addr, conn);
    RepublishPollListLocked();
  }
  conn->StartConnecting();
  return ConnectionRef(conn);
}

void RdmaMessenger::ExpireSessions() {
  std::vector<std::shared_ptr<RdmaConnection>> sessions;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return;
    sessions = sessions_.Accepted();
  }
  const absl::Time now = absl::Now();
  for (const auto& c : sessions) c->ExpireIfGone(now);
  std::vector<std::shared_ptr<Accepting>> accepting;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [k, a] : accepting_) accepting.push_back(a);
  }
  for (const auto& a : accepting) a->Expire(now);
  RetryUnmatchedQpEvents();
  shared_->BuryLingering(/*all=*/false);
}

void RdmaMessenger::OnAsyncEvents() {
  RetryUnmatchedQpEvents();  // their sessions may be set up by now
  verbs::AsyncEvent evs[16];
  int n;
  while (!device_failed_ && (n = shared_->ctx->device->PollAsyncEvents(evs, 16)) > 0) {
    for (int i = 0; i < n && !device_failed_; ++i) HandleAsyncEvent(evs[i]);
  }
}

void RdmaMessenger::HandleAsyncEvent(const verbs::AsyncEvent& ev) {
  const bool qp_event = ev.type == verbs::AsyncEventType::kQpFatal ||
                        ev.type == verbs::AsyncEventType::kQpRequestError ||
                        ev.type == verbs::AsyncEventType::kQpAccessError;
  if (ev.type == verbs::AsyncEventType::kDeviceFatal) {
    // Every QP fails with it (their completions fault the links); the event fd is of no
    // further use and may stay readable for good.
    spdlog::error("msgr rdma: device {} failed (DEVICE_FATAL); no more asynchronous events",
                  device_name());
    device_failed_ = true;
    shared_->loop->UnwatchFd();
    return;
  }
  if (!qp_event) {
    spdlog::info("msgr rdma: device {}: asynchronous event {}", device_name(),
                 verbs::AsyncEventName(ev.type));
    return;
  }
  if (!DeliverQpEvent(ev)) {
    // The QP may belong to a session still being set up: a client may write as soon as its
    // own side is connected, before the accepting side has attached the link. Retried.
    absl::MutexLock l(&unmatched_mu_);
    unmatched_.emplace_back(absl::Now(), ev);
  }
}

bool RdmaMessenger::DeliverQpEvent(const verbs::AsyncEvent& ev) {
  std::vector<std::shared_ptr<RdmaConnection>> conns;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return true;
    conns = sessions_.All();
  }
  for (const auto& c : conns) {
    if (c->OnQpEvent(ev)) return true;  // a live QP number belongs to one connection
  }
  // A session that already ended (e.g. lossy, reset by the flushed completions that
  // preceded the event) is still told: its retired QP lingers.
  if (auto c = shared_->LingeringOwner(ev.qp_num)) return c->OnQpEvent(ev);
  return false;
}

void RdmaMessenger::RetryUnmatchedQpEvents() {
  std::vector<std::pair<absl::Time, verbs::AsyncEvent>> retry;
  {
    absl::MutexLock l(&unmatched_mu_);
    retry.swap(unmatched_);
  }
  if (retry.empty()) return;
  const absl::Time now = absl::Now();
  std::vector<std::pair<absl::Time, verbs::AsyncEvent>> keep;
  for (const auto& [since, ev] : retry) {
    if (DeliverQpEvent(ev)) continue;
    if (now - since < kUnmatchedQpEventTtl) {
      keep.emplace_back(since, ev);
    } else {
      spdlog::warn("msgr rdma: device {}: {} for QP {}, which no connection claimed",
                   device_name(), verbs::AsyncEventName(ev.type), ev.qp_num);
    }
  }
  absl::MutexLock l(&unmatched_mu_);
  unmatched_.insert(unmatched_.end(), keep.begin(), keep.end());
}

std::vector<SessionInfo> RdmaMessenger::DumpSessions() const {
  std::vector<std::shared_ptr<RdmaConnection>> conns;  // copied under the lock: session::InfoOf
  {
    absl::MutexLock l(&mu_);
    conns = sessions_.All();
  }
  return session::InfoOf(conns);
}

void RdmaMessenger::SetPolicy(EntityType type, Policy policy) {
  absl::MutexLock l(&mu_);
  policies_[type] = policy;
}

void RdmaMessenger::RepublishPollListLocked() {
  auto list = std::make_shared<ConnList>();
  *list = sessions_.AllOutgoing();
  std::atomic_store(&poll_list_, std::shared_ptr<const ConnList>(std::move(list)));
}

bool RdmaMessenger::Poll() {
  // Only our own connections carry records whose acks can be polled.
  const std::shared_ptr<const ConnList> conns = std::atomic_load(&poll_list_);
  shared_->app_polled_ns.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
  bool any = false;
  for (const auto& c : *conns) any |= c->PollAcks();
  return any;
}

void RdmaMessenger::Shutdown() {
  std::vector<std::shared_ptr<RdmaConnection>> conns;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    shared_->stopping = true;
    conns = sessions_.All();
    sessions_.Clear();
    RepublishPollListLocked();
  }
  {
    absl::MutexLock h(&shared_->hooks_mu);
    shared_->forget_session = nullptr;
    shared_->drain_async_events = nullptr;
  }
  // Goodbye (see Messenger::Shutdown): `stopping` is set, so these resets call no one back.
  for (auto& c : conns) {
    if (c->outgoing_ && c->lossless() && c->is_connected()) {
      c->Reset(absl::CancelledError("client messenger shutting down"), /*send_close=*/true);
    }
  }
  if (listener_) listener_->Stop();
  if (accept_thread_.joinable()) accept_thread_.join();
  listener_.reset();  // close the socket: later connects are refused, not left hanging
  for (auto& c : conns) c->Stop();
  shared_->setup->Stop();
  shared_->workers->Stop();
  shared_->loop->Stop();
  {
    absl::MutexLock l(&mu_);
    accepting_.clear();  // handshakes in progress: their sockets close
  }
  conns.clear();
  shared_->BuryLingering(/*all=*/true);
}

std::optional<RdmaStats> RdmaStatsOf(const Messenger& m) {
  if (const auto* r = dynamic_cast<const RdmaMessenger*>(&m)) return r->stats();
  return std::nullopt;
}

namespace {
const bool registered = [] {
  RegisterMessengerBackend("rdma", &RdmaMessenger::Create);
  return true;
}();
}  // namespace

}  // namespace msgr::rdma
