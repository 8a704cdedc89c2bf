#include "osd_sim/poller.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "boost/intrusive/list.hpp"
#include "msg/base/errno_status.h"
#include "spdlog/spdlog.h"

namespace msgr::osd {

struct Poller::Pending {
  uint64_t tid = 0;
  uint64_t end_position = 0;
  // For DumpInFlight and the slow_ops gauge: when it was drained (the pass's clock
  // reading, no extra one per record) and its oid, in ring memory, which stays put until
  // the record is released -- after this entry is popped. 18 bytes, no allocation.
  uint64_t drained_ns = 0;
  const char* oid = nullptr;
  uint16_t oid_len = 0;
  std::atomic<bool> done{false};
  absl::Status status;  // written before `done` is set
  // Written before `done`: it was completed inside an ack poll (SetAckPoll), this
  // poller's or another's -- what the ack spin policy learns from.
  bool by_ack_poll = false;
  boost::intrusive::list_member_hook<> hook;  // RingState::pending
};

// A write of several records whose first part came through this ring.
struct Poller::OpenWrite {
  std::string oid;
  uint64_t next_tid = 0;   // the tid its next part carries
  uint32_t write_id = 0;   // the sink's id
  uint64_t last_part_ns = 0;
};

struct Poller::RingState {
  RingState(ConnectionRef c, std::shared_ptr<RecvRing> r)
      : conn(std::move(c)),
        ring(std::move(r)),
        consumer(ring->base(), ring->bytes(), ring->first_seq()),
        from_osd(conn->peer_name().type == EntityType::kOsd),
        sender(conn->peer_name().id) {}
  ConnectionRef conn;
  std::shared_ptr<RecvRing> ring;
  RingConsumer consumer;
  // Entries for drained records, in ring order. An entry stays where it is (its store
  // callback holds a pointer to it) until Complete pops it; popped entries are kept for
  // the next records, so steady state allocates nothing.
  std::deque<Pending> slots;    // every entry ever made (only grows: addresses stay put)
  std::vector<Pending*> spare;  // entries of slots not in pending
  boost::intrusive::list<
      Pending, boost::intrusive::member_hook<Pending, boost::intrusive::list_member_hook<>,
                                             &Pending::hook>>
      pending;
  Pending* PushPending() {
    Pending* p;
    if (spare.empty()) {
      p = &slots.emplace_back();
    } else {
      p = spare.back();
      spare.pop_back();
      p->done.store(false, std::memory_order_relaxed);
      p->status = absl::OkStatus();
      p->by_ack_poll = false;
    }
    pending.push_back(*p);
    return p;
  }
  void PopPending() {
    Pending& p = pending.front();
    pending.pop_front();
    spare.push_back(&p);
  }
  std::vector<OpenWrite> open_writes;            // few: one per large write in flight
  const bool from_osd;    // the producer is a peer OSD (WritePart::from_osd)
  const uint64_t sender;  // its id
  bool removing = false;  // no more polling; erased once pending is empty
  // Its records are announced by a notifier (RecvRing::announced()): looked at when
  // `ready` (reported, or a pass stopped at max_batch) and by full scans only.
  const bool announced = ring->announced() && ring->notifier() != nullptr;
  bool ready = true;
  uint64_t last_records_ns = 0;  // the pass that last took records from it (0: never)
  // Its writer's queue depth (RecordHeader::writer_depth) over the recent records, in
  // sixteenths: an average with weight 1/8 on each new record.
  uint32_t depth_x16 = 0;
  // Its records' payload bytes, averaged the same way.
  uint64_t payload_avg = 0;
};

struct Poller::DumpRequest {
  bool done = false;  // under the poller's mu_
  std::vector<InFlightWrite> ops;
};

namespace {

// The poller whose thread this is (null elsewhere): a store completion that runs inline
// on the poller's own thread needs no eventfd wake-up.
thread_local const Poller* tls_poller = nullptr;
// True while this thread runs a poller's ack poll (Poller::SetAckPoll).
thread_local bool tls_in_ack_poll = false;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// One read takes an eventfd's whole count and makes it unreadable (every fd here is a plain
// eventfd, not EFD_SEMAPHORE); a write after it makes it readable again (the wake-up that
// must not be lost stays pending).
void DrainEventFd(int fd) {
  uint64_t v;
  (void)!read(fd, &v, sizeof v);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Poller>> Poller::Create(int index, const PollerOptions& options,
                                                       RecordSink* sink) {
  const int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) return ErrnoStatus(errno, "eventfd for a poller");
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    close(wake);
    return ErrnoStatus(errno, "epoll_create1 for a poller");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake;
  epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
  return std::unique_ptr<Poller>(new Poller(index, options, sink, wake, ep));
}

Poller::Poller(int index, const PollerOptions& options, RecordSink* sink, int wake_fd,
               int epoll_fd)
    : index_(index), options_(options), sink_(sink), wake_fd_(wake_fd), epoll_fd_(epoll_fd) {
  thread_ = std::thread([this] { Run(); });
  // Named so that `top -H` / perf tell pollers apart (15 chars max).
  pthread_setname_np(thread_.native_handle(), ("osd-poller-" + std::to_string(index_)).c_str());
  if (options_.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(options_.cpu, &set);
    const int rc = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set);
    if (rc != 0) {
      spdlog::warn("poller {}: cannot pin to cpu {}: {}", index_, options_.cpu, std::strerror(rc));
    } else {
      spdlog::info("poller {} pinned to cpu {}", index_, options_.cpu);
    }
  }
}

Poller::~Poller() {
  Stop();
  close(epoll_fd_);
  close(wake_fd_);
}

void Poller::Stop() {
  stop_.store(true);
  Wake();
  if (thread_.joinable()) thread_.join();
}

void Poller::AddRing(const ConnectionRef& conn, std::shared_ptr<RecvRing> ring) {
  {
    absl::MutexLock l(&mu_);
    control_.push_back(ControlOp{conn, nullptr, std::move(ring)});
    conns_.insert(conn.get());
  }
  control_pending_.store(true);
  Wake();
}

void Poller::RemoveRings(const Connection* conn) {
  {
    absl::MutexLock l(&mu_);
    control_.push_back(ControlOp{nullptr, conn, nullptr});
    conns_.erase(conn);
  }
  control_pending_.store(true);
  Wake();
}

void Poller::SetAckPoll(absl::AnyInvocable<bool()> poll) {
  {
    absl::MutexLock l(&mu_);
    new_ack_poll_ = std::move(poll);
  }
  control_pending_.store(true);
  Wake();
}

void Poller::Drive(Messenger* messenger) {
  {
    absl::MutexLock l(&mu_);
    new_driven_ = messenger;
  }
  control_pending_.store(true);
  Wake();
}

void Poller::PublishLocked() {
  // Ops in flight and the slow ones: pending is in drain order, so the slow ones are a
  // prefix of each ring's (O(rings + slow ops) per publish, every 10 ms or before a sleep;
  // a sleep lasts max_sleep at most, so the gauge is that late at worst).
  const uint64_t now = NowNs();
  const uint64_t complaint_ns =
      static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.op_complaint_time));
  counters_.ops_in_flight = 0;
  counters_.slow_ops = 0;
  for (const auto& r : rings_) {
    counters_.ops_in_flight += r->pending.size();
    for (const Pending& p : r->pending) {
      if (p.drained_ns + complaint_ns > now) break;
      ++counters_.slow_ops;
    }
  }
  snapshot_ = counters_;
}

CounterGroup Poller::Group() const {
  CounterGroup g = counters().Group("poller");
  g.histograms.push_back(op_latency_.Snapshot());
  return g;
}

PollerCounters Poller::counters() const {
  absl::MutexLock l(&mu_);
  PollerCounters c = snapshot_;
  c.rings = ring_count_.load();
  // The thread's CPU clock: what perf dump shows as this poller's CPU, next to the busy,
  // spin and crc times.
  c.cpu_ns = exited_ ? exit_cpu_ns_ : cpu_clock_.Ns();
  c.completion_wakes = completion_wakes_.load(std::memory_order_relaxed);
  return c;
}

size_t Poller::ring_count() const { return ring_count_.load(); }

bool Poller::has_rings_of(const Connection* conn) const {
  absl::MutexLock l(&mu_);
  return conns_.count(conn) > 0;
}

std::vector<InFlightWrite> Poller::DumpInFlight(absl::Duration timeout) {
  auto req = std::make_shared<DumpRequest>();
  {
    absl::MutexLock l(&mu_);
    if (exited_) return {};
    dumps_.push_back(req);
  }
  dump_pending_.store(true);
  Wake();
  absl::MutexLock l(&mu_);
  // A request the thread never takes (it stopped meanwhile) is answered as it exits.
  if (!mu_.AwaitWithTimeout(absl::Condition(&req->done), timeout)) return {};
  return std::move(req->ops);
}

void Poller::ServeDumps() {
  std::vector<std::shared_ptr<DumpRequest>> reqs;
  {
    absl::MutexLock l(&mu_);
    reqs.swap(dumps_);
  }
  if (reqs.empty()) return;
  // Outside mu_: naming the client takes its connection's lock.
  const uint64_t now = NowNs();
  std::vector<InFlightWrite> ops;
  for (const auto& r : rings_) {
    if (r->pending.empty()) continue;
    const EntityName client = r->conn->peer_name();
    const std::string addr = r->conn->peer_addr();
    bool earlier_waiting = false;
    for (const Pending& p : r->pending) {
      InFlightWrite w;
      w.poller = index_;
      w.tid = p.tid;
      w.oid.assign(p.oid, p.oid_len);
      w.client = client;
      w.client_addr = addr;
      w.age = absl::Nanoseconds(now > p.drained_ns ? now - p.drained_ns : 0);
      w.slow = w.age >= options_.op_complaint_time;
      if (!p.done.load(std::memory_order_acquire)) {
        w.waiting_for = "store: durable";
        earlier_waiting = true;
      } else {
        w.waiting_for = earlier_waiting ? "ack: behind an earlier record on its ring"
                                        : "ack: released on the poller's next pass";
      }
      ops.push_back(std::move(w));
    }
  }
  absl::MutexLock l(&mu_);
  for (auto& req : reqs) {
    req->ops = ops;
    req->done = true;
  }
}

void Poller::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void Poller::Park() {
  parked_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void Poller::WakeIfParked() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!parked_.load(std::memory_order_relaxed)) return;
  if (!parked_.exchange(false, std::memory_order_relaxed)) return;  // another completer woke it
  completion_wakes_.fetch_add(1, std::memory_order_relaxed);
  Wake();
}

bool Poller::AnyCompletion() const {
  for (const auto& r : rings_) {
    if (!r->pending.empty() && r->pending.front().done.load(std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

void Poller::ApplyControl() {
  std::vector<ControlOp> ops;
  {
    absl::MutexLock l(&mu_);
    ops.swap(control_);
    if (new_ack_poll_) ack_poll_ = std::move(new_ack_poll_);
    new_ack_poll_ = nullptr;
    if (new_driven_ != nullptr) driven_ = std::exchange(new_driven_, nullptr);
    PublishLocked();
  }
  for (ControlOp& op : ops) {
    const Connection* c = op.ring ? op.conn.get() : op.removed;
    auto added = op.ring ? std::make_unique<RingState>(op.conn, op.ring) : nullptr;
    // A removal, or a ring replacing the connection's old one: a new session's, or a
    // resized ring of the same session, which goes on where the old one stopped and takes
    // over its unfinished writes of several records (their later parts come through it).
    for (auto& r : rings_) {
      if (r->conn.get() != c || r->removing) continue;
      r->removing = true;
      if (added && added->ring->first_seq() > 1 &&
          added->ring->first_seq() == r->consumer.next_seq()) {
        added->open_writes = std::move(r->open_writes);
        r->open_writes.clear();
      }
    }
    if (!added) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = added->ring->wait_fd();
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, added->ring->wait_fd(), &ev);
    if (RingNotifier* n = added->ring->notifier();
        n != nullptr && std::find(notifiers_.begin(), notifiers_.end(), n) == notifiers_.end()) {
      // The notifier runs the session's receives: polled every pass from now on (it lives
      // as long as its messenger, which outlives the OSD's pollers).
      notifiers_.push_back(n);
      epoll_event nev{};
      nev.events = EPOLLIN;
      nev.data.fd = n->wait_fd();
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, n->wait_fd(), &nev);
    }
    if (added->announced) {
      announced_[added->ring.get()] = added.get();
    } else if (!added->ring->producer_signals()) {
      ++unannounced_;
    }
    full_scan_due_ = true;
    rings_.push_back(std::move(added));
  }
  for (auto it = rings_.begin(); it != rings_.end();) {
    if ((*it)->removing && (*it)->pending.empty()) {
      AbortOpenWrites(it->get());
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, (*it)->ring->wait_fd(), nullptr);
      if (auto a = announced_.find((*it)->ring.get());
          a != announced_.end() && a->second == it->get()) {
        announced_.erase(a);
      } else if (!(*it)->announced && !(*it)->ring->producer_signals()) {
        --unannounced_;
      }
      it = rings_.erase(it);
    } else {
      ++it;
    }
  }
  ring_count_.store(rings_.size());
}

void Poller::PollNotifiers() {
  RecvRing* ready[64];
  for (RingNotifier* n : notifiers_) {
    for (;;) {
      const size_t got = n->Poll(ready, 64);
      for (size_t i = 0; i < got; ++i) {
        auto it = announced_.find(ready[i]);
        if (it == announced_.end()) continue;  // a ring this poller let go of
        it->second->ready = true;
      }
      if (got < 64) break;
    }
  }
}

bool Poller::ClearNotifierFd(int fd) {
  for (RingNotifier* n : notifiers_) {
    if (n->wait_fd() == fd) {
      n->ClearWait();
      return true;
    }
  }
  return false;
}

bool Poller::PollRing(RingState* r, uint64_t now_ns) {
  if (r->removing) return false;
  r->ready = false;
  bool found = false;
  const uint64_t crc_ns_before = r->consumer.crc_ns();
  const uint64_t crc_bytes_before = r->consumer.crc_bytes();
  absl::Cleanup crc_counts = [&] {
    counters_.crc_ns += r->consumer.crc_ns() - crc_ns_before;
    counters_.crc_bytes += r->consumer.crc_bytes() - crc_bytes_before;
  };
  for (size_t n = 0;; ++n) {
    if (n == options_.max_batch) {
      r->ready = true;  // more may wait: the next pass looks again
      break;
    }
    RecordView rec;
    std::string error;
    const auto res = r->consumer.Next(&rec, &error);
    if (res == RingConsumer::Poll::kEmpty) break;
    if (res == RingConsumer::Poll::kCorrupt) {
      ++counters_.crc_errors;
      spdlog::error("osd poller {}: dropping connection from {} ({}): {}", index_,
                    r->conn->peer_name().ToString(), r->conn->peer_addr(), error);
      r->removing = true;
      r->conn->MarkDown();
      break;
    }
    found = true;
    ++counters_.records;
    if (r->from_osd) ++counters_.replica_records;
    counters_.bytes += rec.header->payload_len;
    r->depth_x16 = (r->depth_x16 * 7 + (uint32_t{rec.header->writer_depth} << 4)) / 8;
    r->payload_avg = (r->payload_avg * 7 + rec.header->payload_len) / 8;
    counters_.ring_high_water_bytes =
        std::max<uint64_t>(counters_.ring_high_water_bytes, r->consumer.in_use());
    Pending* p = r->PushPending();
    p->tid = rec.header->tid;
    p->end_position = rec.end_position;
    p->drained_ns = now_ns;
    p->oid = rec.oid;
    p->oid_len = rec.header->oid_len;
    WritePart part;
    part.from_osd = r->from_osd;
    part.sender = r->sender;
    part.ring = &r->ring;
    std::string why;
    if (!ClassifyPart(r, rec, &part, &why)) {
      ++counters_.orphan_parts;
      // Retryable: the client sends the whole write again.
      p->status = absl::AbortedError(why);
      p->done.store(true, std::memory_order_release);
      continue;
    }
    // `p` stays valid until the poller sees `done` (it pops the entry only then); the
    // callback touches it no more after setting it.
    const absl::StatusOr<uint32_t> id = sink_->Persist(rec, part, [this, p](absl::Status s) {
      p->status = std::move(s);
      p->by_ack_poll = tls_in_ack_poll;
      p->done.store(true, std::memory_order_release);
      if (tls_poller != this) WakeIfParked();
    });
    if (!id.ok()) {
      // Refused at once (nothing stored, the callback will not run): acked with that
      // status in ring order. A first part refused opens nothing: the rest of its write
      // is then refused like any part without its first.
      p->status = id.status();
      p->done.store(true, std::memory_order_release);
      continue;
    }
    if (part.kind == WritePart::Kind::kFirst) {
      r->open_writes.push_back(OpenWrite{std::string(rec.oid, rec.header->oid_len),
                                         rec.header->tid + 1, *id, NowNs()});
    }
  }
  return found;
}

bool Poller::ClassifyPart(RingState* r, const RecordView& rec, WritePart* part,
                          std::string* why) {
  const RecordHeader& h = *rec.header;
  const bool first = (h.flags & kRecordFlagTruncate) != 0;
  const bool last = (h.flags & kRecordFlagLast) != 0;
  if (first) {
    part->kind = last ? WritePart::Kind::kWhole : WritePart::Kind::kFirst;
    return true;
  }
  const std::string_view oid(rec.oid, h.oid_len);
  auto w = std::find_if(r->open_writes.begin(), r->open_writes.end(), [&](const OpenWrite& o) {
    return o.next_tid == h.tid && o.oid == oid;
  });
  if (w == r->open_writes.end()) {
    *why = absl::StrCat("tid ", h.tid, " of '", std::string(oid),
                        "' continues a write whose first part this session does not have "
                        "(never sent, not stored, or dropped)");
    return false;
  }
  part->kind = last ? WritePart::Kind::kLast : WritePart::Kind::kMiddle;
  part->write_id = w->write_id;
  if (last) {
    r->open_writes.erase(w);
  } else {
    ++w->next_tid;
    w->last_part_ns = NowNs();
  }
  return true;
}

void Poller::AbortStaleWrites(uint64_t now_ns) {
  const uint64_t limit =
      static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.open_write_timeout));
  for (auto& r : rings_) {
    auto& ws = r->open_writes;
    for (auto w = ws.begin(); w != ws.end();) {
      // last_part_ns may be later than now_ns (the caller's clock reading predates the
      // look that opened the write): no unsigned wrap-around.
      if (w->last_part_ns + limit > now_ns) {
        ++w;
        continue;
      }
      spdlog::warn("osd poller {}: write of '{}' from {} got no part for {}: dropped", index_,
                   w->oid, r->conn->peer_addr(),
                   absl::FormatDuration(options_.open_write_timeout));
      AbortWrite(*w);
      w = ws.erase(w);
    }
  }
}

void Poller::AbortOpenWrites(RingState* r) {
  for (const OpenWrite& w : r->open_writes) AbortWrite(w);
  r->open_writes.clear();
}

void Poller::AbortWrite(const OpenWrite& w) {
  ++counters_.writes_aborted;
  sink_->AbortWrite(w.oid, w.write_id);
}

void Poller::Complete(RingState* r) {
  uint64_t release_to = 0;
  failed_.clear();
  uint64_t now = 0;  // read once, when the first record is done
  while (!r->pending.empty() && r->pending.front().done.load(std::memory_order_acquire)) {
    const Pending& p = r->pending.front();
    // Client writes that succeeded: a replica's record is part of its primary's op, and a
    // record refused at once never reached the store.
    if (!r->from_osd && p.status.ok()) {
      if (now == 0) now = NowNs();
      op_latency_.Record(now > p.drained_ns ? now - p.drained_ns : 0);
    }
    if (!p.status.ok()) {
      ++counters_.write_errors;
      spdlog::warn("osd poller {}: write tid {} from {} failed: {}", index_, p.tid,
                   r->conn->peer_addr(), p.status.ToString());
      failed_.push_back(RecordAck{p.tid, p.status.code()});
    }
    release_to = p.end_position;
    completed_by_ack_poll_ = completed_by_ack_poll_ || p.by_ack_poll;
    r->PopPending();
  }
  if (release_to == 0) return;
  // One call frees the space and acknowledges every record before `release_to`.
  r->consumer.Release(release_to);
  r->conn->ReleaseRing(release_to, failed_);
  ++counters_.acks_sent;
  if (!failed_.empty()) {  // errors show in `perf dump` at once (other counters: 10 ms)
    absl::MutexLock l(&mu_);
    PublishLocked();
  }
}

bool Poller::Sleep() {
  // Drain the readable eventfds first (and clear readable notifiers, which Arm re-arms
  // below), then say we sleep, then look once more: whatever wakes us
  // after the drain (a doorbell, a store completion, a ring added) stays pending and ends
  // the epoll_wait at once, and whatever happened before it is seen by the last look. In
  // the other order a store completion (or a doorbell) arriving between the caller's last
  // look and the drain was swallowed, and its ack waited for the epoll timeout.
  // RDMA producers rely on this order too: a doorbell sent for this sleep (they saw its
  // sleep word, published after the drain) can never be drained unseen, so they send one
  // per sleep, not one per record (RdmaConnection::CheckDoorbellLocked).
  // Announced rings need no doorbell: their notifier is armed instead, and its next
  // completion (a record's imm, a message) makes its fd readable.
  DrainReadyFds();
  for (auto& r : rings_) {
    if (!r->announced) r->ring->SetPollerSleeping(true);
  }
  for (RingNotifier* n : notifiers_) n->Arm();
  Park();  // before the last look: a completion it misses wakes the epoll_wait below
  bool work = control_pending_.load() || dump_pending_.load() || stop_.load();
  bool unsignalled_records = false;
  const uint64_t look_ns = NowNs();
  if (!work) PollNotifiers();  // marks rings ready; the look below takes every ring
  for (auto& r : rings_) {
    if (work) break;
    if (PollRing(r.get(), look_ns)) {
      work = true;
      unsignalled_records = !r->ring->producer_signals();
    }
  }
  last_full_scan_ns_ = look_ns;
  work = work || AnyCompletion();
  auto awake = [&] {
    for (auto& r : rings_) {
      if (!r->announced) r->ring->SetPollerSleeping(false);
    }
  };
  if (work) {
    Unpark();
    awake();
    return unsignalled_records;
  }
  {
    absl::MutexLock l(&mu_);
    PublishLocked();
  }
  const uint64_t t0 = NowNs();
  epoll_event evs[16];
  int n;
  if (driven_ != nullptr) {
    // The messenger's sockets wake us too: it returns once it ran something (a socket
    // read that filled a ring, an ack), and the caller's next pass looks.
    // Its CPU is the transport's: what it ran meanwhile (a sleep takes no CPU).
    CountDrivenCpu([&] { driven_->WaitFor(epoll_fd_, options_.max_sleep); });
    driven_idle_until_ = 0;  // the next pass polls: WaitFor may have left handlers ready
    n = epoll_wait(epoll_fd_, evs, 16, 0);
  } else {
    n = epoll_wait(epoll_fd_, evs, 16,
                   static_cast<int>(absl::ToInt64Milliseconds(options_.max_sleep)));
  }
  counters_.sleep_ns += NowNs() - t0;
  Unpark();
  for (int i = 0; i < n; ++i) ClearNotifierFd(evs[i].data.fd);
  awake();
  ++counters_.sleeps;
  full_scan_due_ = true;  // woken by a ring's eventfd, a timeout: look at every ring
  return false;
}

void Poller::Nap(uint64_t* count, uint64_t ns) {
  Park();
  if (AnyCompletion()) {  // one came since the pass looked: no nap
    Unpark();
    return;
  }
  ++*count;
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  pollfd p{epoll_fd_, POLLIN, 0};
  const uint64_t t0 = NowNs();
  const int ready = ppoll(&p, 1, &ts, nullptr);
  counters_.sleep_ns += NowNs() - t0;  // not CPU: a nap is not spin
  Unpark();
  if (ready <= 0) return;
  // Woken early (a store completion, a control change, a new ring's signal): drain what fired
  // so that the next nap waits again; the caller's next pass handles it.
  DrainReadyFds();
}

void Poller::DrainReadyFds() {
  // Only the fds that are readable: one epoll_wait instead of a read per ring (a poller
  // that owns many rings sleeps often). Bounded: fds written again meanwhile stay pending.
  epoll_event evs[16];
  const size_t fds = rings_.size() + notifiers_.size() + 1;
  for (size_t pass = 0; pass <= fds / 16; ++pass) {
    const int n = epoll_wait(epoll_fd_, evs, 16, 0);
    for (int i = 0; i < n; ++i) {
      if (!ClearNotifierFd(evs[i].data.fd)) DrainEventFd(evs[i].data.fd);
    }
    if (n < 16) break;
  }
}

Poller::NapReason Poller::NapsNow(uint64_t now_ns) {
  size_t active = 0;
  uint32_t deepest_x16 = 0;
  uint64_t deepest_payload = 0;
  for (const auto& r : rings_) {
    if (r->ring->producer_signals() || r->last_records_ns + kActiveProducerWindowNs <= now_ns) {
      continue;
    }
    ++active;
    if (r->depth_x16 >= deepest_x16) {
      deepest_x16 = r->depth_x16;
      deepest_payload = r->payload_avg;
    }
  }
  // A deep queue's nap covers the time its writer takes to send the next records, which
  // grows with their size (it copies and checksums each payload): from a quarter of `nap`
  // for small records to all of it from kFullNapPayload (docs/BENCHMARKS.md "Session 41":
  // 10 us naps 1.24x the IOPS of 40 us at 4 KiB -t 16 and 0.72x at 64 KiB).
  constexpr uint64_t kFullNapPayload = 64 << 10;
  const uint64_t nap = static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.nap));
  deep_queue_nap_ns_ = nap / 4 + nap * 3 / 4 * std::min(deepest_payload, kFullNapPayload) /
                                     kFullNapPayload;
  counters_.deep_queue_nap_us = deep_queue_nap_ns_ / 1000;
  counters_.writer_depth = deepest_x16 / 16;
  if (options_.nap <= absl::ZeroDuration()) return NapReason::kNone;
  if (options_.nap_rings > 0 && active >= options_.nap_rings) return NapReason::kManyProducers;
  if (options_.nap_depth > 0 && deepest_x16 >= options_.nap_depth * 16) {
    return NapReason::kDeepQueue;
  }
  return NapReason::kNone;
}

void Poller::Run() {
  tls_poller = this;
  {
    absl::MutexLock l(&mu_);
    cpu_clock_ = ThreadCpuClock::OfThisThread();
  }
  driven_cpu_ = ThreadCpuClock::OfThisThread();
  SpinPolicy doorbell_policy(SpinPolicy::Options{
      static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.spin)),
      static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.wakeup_cost)),
      options_.adaptive_spin});
  // While every ring nobody signals is announced by a notifier, a wake-up is one thread's
  // (the notifier's channel), not a doorbell's chain. Where the store holds records for a
  // sync (store_syncs, and it did in the last kStoreBoundNs) that wake-up is small against
  // the op, and the policy weighs gaps against it; in memory mode a poller's records are
  // tens of microseconds apart and a wake-up would double the op's latency, so it weighs
  // them as before (memory 4 KiB -t 1 p50 19 -> 62 us with 150 us here; size 3 -t 1 0.92x
  // the IOPS; durable -t 1 the OSD CPU per op 0.43x; docs/BENCHMARKS.md "Session 37").
  SpinPolicy notified_policy(SpinPolicy::Options{
      static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.spin)),
      static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.notified_wakeup_cost)),
      options_.adaptive_spin});
  SpinPolicy* spin_policy = &doorbell_policy;  // the open idle period's
  constexpr uint64_t kStoreBoundNs = 10'000'000;
  uint64_t held_at = 0;  // the last pass that found the store holding records
  uint64_t idle_since = NowNs();
  uint64_t last_publish = idle_since;
  // Hybrid polling on rings nobody signals (RDMA). After their last record, or after acks
  // sent on them (a client answers its acks with new writes), an idle period starts: the
  // poller spins what the SpinPolicy says, then sleeps. While the store holds records of
  // such a ring (durable mode: the client waits for their acks) it does not spin (that
  // only takes the flushers' CPU) but naps (Nap: the store's completion ends a nap at
  // once) for up to kHeldNapsNs after the last records: the client's next records, which
  // come while the store syncs, are found without a doorbell (sleeping at once here made
  // three in four records need one; with the naps durable 4 KiB -t 16 made 1.56x the IOPS
  // at 0.53x the OSD's busy CPU per op, medians of 3, docs/BENCHMARKS.md "Session 21").
  // Then it sleeps. Records on signalled rings (TCP: the reader wakes a sleeping poller)
  // never start a spin.
  // kSpinning: a policy period is open; kHeld: the store holds records of such a ring.
  enum class Idle { kBusy, kSpinning, kHeld, kNone };
  Idle idle = Idle::kNone;
  uint64_t unsignalled_work_at = 0;  // the last records or acks on an unsignalled ring
  bool idle_slept = false;           // the open period has slept
  uint64_t spin_budget = 0;          // the open period spins this long from the above
  bool nap = false;                  // the open period naps between looks (many producers)
  const uint64_t nap_ns = static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.nap));
  constexpr uint64_t kHeldNapsNs = 1'000'000;  // about one fdatasync here
  // A nap ends the spin counted so far (up to `now`); the nap itself is not spin.
  uint64_t period_nap_ns = nap_ns;  // the open period's naps (a deep queue's: shorter)
  auto nap_from = [&](uint64_t now, uint64_t* count, uint64_t ns) {
    counters_.spin_ns += now - std::min(idle_since, now);
    Nap(count, ns);
    idle_since = NowNs();
  };
  // Waits for held records' acks that ack_poll_ can reap (PollerOptions::ack_spin): from
  // the pass that found the poller holding records with nothing else to do to the pass
  // that completed some. Short: ended within the spin by records completed inside an ack
  // poll (this poller's, or another's that took the acks first). Long: napped after the
  // budget, or ended by completions on other threads (the store's syncs: the spin only
  // took their CPU).
  // Held periods come by the thousand per second under load, and a probe's spin takes CPU
  // the flushers need: one probe in 64 (one in 8 cost durable size-3 4 KiB -t 16 ~6%).
  SpinPolicy::Options ack_opts;
  ack_opts.max_spin_ns = static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.ack_spin));
  ack_opts.wakeup_cost_ns = ack_opts.max_spin_ns;
  ack_opts.probe_every = 64;
  SpinPolicy ack_policy(ack_opts);
  uint64_t held_since = 0;
  uint64_t ack_spin_budget = 0;  // 0: this held period naps at once
  bool held_napped = false;
  auto records_at = [&](uint64_t at, bool slept) {
    if (idle == Idle::kSpinning) spin_policy->EndIdle(at - unsignalled_work_at, slept);
    idle = Idle::kBusy;
    unsignalled_work_at = at;
  };
  while (!stop_.load(std::memory_order_relaxed)) {
    if (control_pending_.exchange(false)) ApplyControl();
    if (dump_pending_.load(std::memory_order_relaxed) && dump_pending_.exchange(false)) {
      ServeDumps();
    }
    uint64_t pass_start = NowNs();
    if (driven_ != nullptr && pass_start >= driven_idle_until_) {
      // Socket reads fill rings, acks complete records: this pass finds them. Its CPU is
      // the transport's, not the pass's (busy_ns, which starts after it).
      bool ran = false;
      CountDrivenCpu([&] { ran = driven_->Poll(); });
      pass_start = NowNs();
      driven_idle_until_ = ran ? 0 : pass_start + kDrivenIdlePollNs;
    }
    bool work = false;
    bool unsignalled = false;  // records on a ring nobody signals
    bool acked = false;        // acks sent on one
    bool held = false;         // the store holds records of one
    completed_by_ack_poll_ = false;
    // Announced rings are looked at when their notifier reports them; all rings now and
    // then (kFullScanNs), after a sleep and when rings change.
    if (!notifiers_.empty()) PollNotifiers();
    const bool full_scan = full_scan_due_ || pass_start - last_full_scan_ns_ >= kFullScanNs;
    if (full_scan) {
      full_scan_due_ = false;
      last_full_scan_ns_ = pass_start;
    }
    for (auto& r : rings_) {
      const bool signals = r->ring->producer_signals();
      if ((!r->announced || r->ready || full_scan) && PollRing(r.get(), pass_start)) {
        r->last_records_ns = pass_start;
        work = true;
        unsignalled = unsignalled || !signals;
      }
      if (!r->pending.empty() && r->pending.front().done.load(std::memory_order_acquire)) {
        Complete(r.get());
        work = true;
        acked = acked || !signals;
      }
      held = held || (!signals && !r->pending.empty());
    }
    const uint64_t now = NowNs();
    if (held) held_at = now;
    if (unsignalled) {
      records_at(now, idle_slept);
    } else if (acked) {
      if (idle == Idle::kHeld && ack_spin_budget > 0) {
        const bool reaped = completed_by_ack_poll_;
        ack_policy.EndIdle(reaped ? now - held_since : UINT64_MAX, held_napped);
        if (reaped && !held_napped) ++counters_.ack_spin_hits;
      }
      idle = Idle::kBusy;  // a new period, from the acks
      unsignalled_work_at = now;
    } else if (idle == Idle::kBusy) {
      if (held) {
        idle = Idle::kHeld;
        held_since = now;
        held_napped = false;
        ack_spin_budget = ack_poll_ && options_.ack_spin > absl::ZeroDuration()
                              ? ack_policy.BeginIdle()
                              : 0;
        if (ack_spin_budget > 0) ++counters_.ack_spins;
      } else {
        idle = Idle::kSpinning;
        idle_slept = false;
        spin_policy = options_.store_syncs && unannounced_ == 0 && !announced_.empty() &&
                              now - std::min(held_at, now) < kStoreBoundNs
                          ? &notified_policy
                          : &doorbell_policy;
        spin_budget = spin_policy->BeginIdle();
        const NapReason why = NapsNow(now);
        nap = why != NapReason::kNone;
        period_nap_ns = why == NapReason::kDeepQueue ? deep_queue_nap_ns_ : nap_ns;
        if (why == NapReason::kDeepQueue) ++counters_.deep_queue_periods;
        if (spin_budget == 0) ++counters_.sleeps_at_once;
        counters_.spin_short_pm = spin_policy->short_permille();
      }
    }
    if (work) {
      ++counters_.poll_hits;
      // Spinning is the empty passes since the last work, not this pass's work.
      counters_.spin_ns += pass_start - std::min(idle_since, pass_start);
      counters_.busy_ns += now - pass_start;
      idle_since = now;
    } else {
      ++counters_.poll_misses;
      if (idle == Idle::kHeld && now - held_since < ack_spin_budget) {
        // The acks' next pass completes them (their callbacks ran on this thread).
        tls_in_ack_poll = true;
        const bool found = ack_poll_();
        tls_in_ack_poll = false;
        if (!found) sched_yield();
      } else if (idle == Idle::kHeld && nap_ns > 0 && now - unsignalled_work_at < kHeldNapsNs) {
        held_napped = true;
        // A store completion ends it; no doorbell needed.
        nap_from(now, &counters_.held_naps, nap_ns);
      } else if (idle != Idle::kSpinning || now - unsignalled_work_at >= spin_budget) {
        counters_.spin_ns += now - idle_since;
        {
          // A sleeping poller publishes nothing: what perf dump shows of an idle OSD
          // must include its last records.
          absl::MutexLock l(&mu_);
          PublishLocked();
        }
        if (Sleep()) {
          records_at(NowNs(), false);  // the last look before sleeping found records
        } else {
          idle_slept = true;
        }
        idle_since = NowNs();
      } else {
        if (nap) {
          // Many producers, or a deep queue: their threads need the cores.
          nap_from(now, &counters_.naps, period_nap_ns);
        } else {
          sched_yield();  // let the reader threads run on this core while we spin
        }
      }
    }
    if (now - last_publish > 10'000'000) {
      AbortStaleWrites(NowNs());  // `now` predates Sleep()'s last look
      absl::MutexLock l(&mu_);
      PublishLocked();
      last_publish = now;
      // Rings marked for removal are erased once their records are done.
      for (const auto& r : rings_) {
        if (r->removing) control_pending_.store(true);
      }
    }
  }
  // Shutdown: wait (bounded) for records the store still holds, so their ring memory
  // stays valid until the store is done with it.
  const uint64_t deadline = NowNs() + 10'000'000'000ull;
  for (auto& r : rings_) {
    while (!r->pending.empty() && NowNs() < deadline) {
      if (r->pending.front().done.load()) {
        Complete(r.get());
      } else {
        usleep(1000);
      }
    }
  }
  // Dumps asked for meanwhile get what is left; later ones get nothing at once.
  {
    absl::MutexLock l(&mu_);
    exit_cpu_ns_ = cpu_clock_.Ns();
    exited_ = true;
  }
  ServeDumps();
}

}  // namespace msgr::osd
