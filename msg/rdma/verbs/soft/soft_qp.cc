// Soft QP: connection setup, state transitions, completion ordering and the target side
// (what the service thread does for a peer's requests). The send path is in
// soft_qp_datapath.cc.
#include "msg/rdma/verbs/soft/soft_qp.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "msg/base/errno_status.h"

namespace msgr {
namespace verbs {
namespace soft {

namespace {
constexpr int kHandshakeTimeoutMs = 5000;
}

RemotePeer::~RemotePeer() {
  for (auto& kv : mappings) ::munmap(kv.second.base, kv.second.bytes);
  absl::MutexLock l(&reply_mu);
  if (reply_fd >= 0) ::close(reply_fd);
}

QpCore::QpCore(std::shared_ptr<PdCore> pd, std::shared_ptr<CqCore> send_cq,
               std::shared_ptr<CqCore> recv_cq, SharedRq rq, const QpConfig& config,
               uint32_t qp_num, uint32_t psn)
    : pd_(std::move(pd)),
      send_cq_(std::move(send_cq)),
      recv_cq_(std::move(recv_cq)),
      config_(config),
      qp_num_(qp_num),
      psn_(psn),
      rq_(std::move(rq)),
      rq_sges_(rq_.capacity()) {}

QpEndpoint QpCore::LocalEndpoint() const {
  QpEndpoint ep;
  ep.qp_num = qp_num_;
  ep.psn = psn_;
  ep.mtu = 4096;
  ep.locator = pd_->dev->locator();
  return ep;
}

QpState QpCore::state() const {
  absl::MutexLock l(&mu_);
  return state_;
}

absl::Status QpCore::ModifyToRtr(const QpEndpoint& remote) {
  {
    absl::MutexLock l(&mu_);
    if (closed_) return absl::FailedPreconditionError("soft: QP is closed");
    if (state_ != QpState::kInit) {
      return absl::FailedPreconditionError(
          absl::StrCat("soft: ModifyToRtr needs INIT, QP is ", QpStateName(state_)));
    }
  }
  if (remote.locator.empty()) {
    return absl::InvalidArgumentError(
        "soft: remote endpoint has no locator (is the peer using the soft provider?)");
  }
  if (LocatorScope(remote.locator) != LocatorScope(pd_->dev->locator())) {
    // Without this check the connect below fails with "connection refused" (another
    // namespace) or, worse, finds nothing and the caller waits for its timeout.
    return absl::FailedPreconditionError(absl::StrCat(
        "soft: the peer's soft RDMA device (@", remote.locator,
        ") is on another host or network namespace; the soft provider works only between "
        "processes of one host: use a verbs device (an RNIC, rxe or siw) on both hosts "
        "(--rdma-device IBDEV) or --ms-type tcp"));
  }
  absl::StatusOr<int> fd = ConnectAbstract(remote.locator);
  if (!fd.ok()) return fd.status();
  auto link = std::make_shared<Conn>(*fd, /*outgoing=*/true);
  WireHeader hello;
  hello.type = static_cast<uint32_t>(MsgType::kHello);
  hello.a = remote.qp_num;
  hello.b = qp_num_;
  absl::Status st = SendMessage(link->fd, hello);
  if (!st.ok()) return st;
  struct pollfd pfd = {link->fd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, kHandshakeTimeoutMs);
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("soft: no answer from the peer device @", remote.locator));
  }
  WireHeader rep;
  int table_fd = -1;
  st = RecvHeader(link->fd, &rep, &table_fd);
  if (!st.ok()) return st;
  if (rep.type != static_cast<uint32_t>(MsgType::kHelloOk) || table_fd < 0) {
    if (table_fd >= 0) ::close(table_fd);
    return absl::NotFoundError(absl::StrCat("soft: peer device @", remote.locator,
                                            " has no QP ", remote.qp_num));
  }
  absl::StatusOr<RegionTable> table = RegionTable::Attach(table_fd);
  if (!table.ok()) return table.status();
  auto peer = std::make_shared<RemotePeer>();
  peer->link = link;
  peer->table = std::move(*table);
  peer->pd_id = rep.a;
  peer->qp_num = remote.qp_num;
  // The peer's receive queue and receive CQ, sent right behind kHelloOk.
  int inbox_fd[3] = {-1, -1, -1};
  for (int i = 0; i < 3 && st.ok(); ++i) {
    WireHeader ib;
    int fd = -1;
    st = RecvHeader(link->fd, &ib, &fd);
    if (st.ok() && (ib.type != static_cast<uint32_t>(MsgType::kInbox) ||
                    ib.a != static_cast<uint32_t>(i + 1) || fd < 0)) {
      st = absl::InternalError(absl::StrCat("soft: peer device @", remote.locator,
                                            " did not share its queues (message ", ib.type,
                                            "): is it an older msgr?"));
    }
    if (fd < 0) continue;
    if (st.ok()) {
      inbox_fd[i] = fd;
    } else {
      ::close(fd);
    }
  }
  if (!st.ok()) {
    for (int fd : inbox_fd) {
      if (fd >= 0) ::close(fd);
    }
    return st;
  }
  absl::StatusOr<SharedRq> rq = SharedRq::Attach(inbox_fd[0]);
  absl::StatusOr<SharedCq> cq = SharedCq::Attach(inbox_fd[1], inbox_fd[2]);
  if (!rq.ok()) return rq.status();
  if (!cq.ok()) return cq.status();
  peer->rq = std::make_unique<SharedRq>(std::move(*rq));
  peer->cq = std::make_unique<SharedCq>(std::move(*cq));
  link->qp = weak_from_this();
  std::atomic_store(&remote_, peer);
  st = pd_->dev->AddConn(link);
  if (!st.ok()) return st;
  absl::MutexLock l(&mu_);
  if (state_ == QpState::kInit) state_ = QpState::kRtr;
  return absl::OkStatus();
}

absl::Status QpCore::ModifyToRts() {
  absl::MutexLock l(&mu_);
  if (state_ != QpState::kRtr) {
    return absl::FailedPreconditionError(
        absl::StrCat("soft: ModifyToRts needs RTR, QP is ", QpStateName(state_)));
  }
  state_ = QpState::kRts;
  return absl::OkStatus();
}

absl::Status QpCore::ModifyToError() {
  absl::MutexLock l(&mu_);
  if (closed_) return absl::FailedPreconditionError("soft: QP is closed");
  FailAllLocked(WcStatus::kWrFlushError);
  return absl::OkStatus();
}

void QpCore::Close() {
  std::shared_ptr<RemotePeer> remote;
  std::vector<std::weak_ptr<Conn>> incoming;
  {
    absl::MutexLock pl(&post_mu_);
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    state_ = QpState::kError;
    sq_.clear();  // Destroying a QP discards its WRs without completions (as ibv_destroy_qp).
    (void)rq_.Close();
    remote = std::atomic_load(&remote_);
    incoming.swap(incoming_);
    if (remote) {
      // The peer's regions we mapped (under post_mu_): unmapped now, not when the last
      // reference to `remote` goes -- a freed peer region stays resident while mapped.
      for (auto& kv : remote->mappings) ::munmap(kv.second.base, kv.second.bytes);
      remote->mappings.clear();
    }
  }
  pd_->dev->RemoveQp(qp_num_);
  // As ibv_destroy_qp: the QP's asynchronous events not yet read are gone with it.
  pd_->dev->DropAsyncEvents(qp_num_);
  // The service thread sees EOF, drops the connections, and the peer sees EOF too.
  if (remote) ::shutdown(remote->link->fd, SHUT_RDWR);
  for (auto& w : incoming) {
    if (auto c = w.lock()) ::shutdown(c->fd, SHUT_RDWR);
  }
  if (remote) {
    absl::MutexLock l(&remote->reply_mu);
    remote->gone = true;
  }
}

void QpCore::AddIncoming(const std::shared_ptr<Conn>& conn) {
  absl::MutexLock l(&mu_);
  if (closed_) {
    ::shutdown(conn->fd, SHUT_RDWR);
    return;
  }
  incoming_.push_back(conn);
}

// ---------------------------------------------------------------------------------------
// Completion ordering and error transitions.

QpCore::SqEntry* QpCore::FindSqLocked(uint64_t seq) {
  if (sq_.empty() || seq < sq_.front().seq) return nullptr;
  size_t idx = seq - sq_.front().seq;
  if (idx >= sq_.size()) return nullptr;
  return &sq_[idx];
}

void QpCore::DrainSqLocked() {
  while (!sq_.empty() && sq_.front().done) {
    const SqEntry& e = sq_.front();
    if (e.signaled || config_.signal_all || e.status != WcStatus::kSuccess) {
      Completion c;
      c.wr_id = e.wr_id;
      c.status = e.status;
      c.opcode = e.opcode;
      c.byte_len = e.byte_len;
      c.qp_num = qp_num_;
      send_cq_->Push(c);
      // Like an HCA, the slots of unsignalled WRs are released by a later completion.
      sq_used_ -= 1 + unsignaled_retired_;
      unsignaled_retired_ = 0;
    } else {
      ++unsignaled_retired_;
    }
    sq_.pop_front();
  }
}

void QpCore::FailWrLocked(uint64_t seq, WcStatus status) {
  SqEntry* e = FindSqLocked(seq);
  if (e != nullptr && !(e->done && e->status != WcStatus::kSuccess)) {
    e->done = true;
    e->status = status;
  }
  state_ = QpState::kError;
  for (SqEntry& later : sq_) {
    if (later.seq > seq) {
      // Even a later WRITE whose bytes already landed reports "flushed": after an error the
      // transport must treat the whole connection as dead anyway.
      later.done = true;
      later.status = WcStatus::kWrFlushError;
    }
  }
  FlushRecvLocked();
  DrainSqLocked();
}

void QpCore::FailAllLocked(WcStatus first) {
  state_ = QpState::kError;
  // WRs that finished before the first unfinished one keep their status; that one gets
  // `first`, and every WR after it is flushed -- even one whose bytes already landed and
  // that only waited to be reported in order (as FailWrLocked, and as an HCA does).
  bool failed_one = false;
  for (SqEntry& e : sq_) {
    if (!failed_one) {
      if (e.done) continue;
      e.done = true;
      e.status = first;
      failed_one = true;
    } else if (!e.done || e.status == WcStatus::kSuccess) {
      e.done = true;
      e.status = WcStatus::kWrFlushError;
    }
  }
  FlushRecvLocked();
  DrainSqLocked();
}

void QpCore::FlushRecvLocked() {
  for (uint64_t wr_id : rq_.Close()) {
    PushRecvCompletion(wr_id, WcStatus::kWrFlushError, WcOpcode::kRecv, 0, 0, false);
  }
}

bool QpCore::AwaitingAckLocked() {
  const SqEntry* e = FindSqLocked(awaiting_ack_wr_);
  return e != nullptr && !e->done;
}

bool QpCore::SendInbox(const std::shared_ptr<Conn>& conn) {
  const int fds[3] = {rq_.mem_fd(), recv_cq_->mem_fd(), recv_cq_->event_fd()};
  absl::MutexLock l(&conn->write_mu);
  for (uint32_t i = 0; i < 3; ++i) {
    WireHeader hdr;
    hdr.type = static_cast<uint32_t>(MsgType::kInbox);
    hdr.a = i + 1;
    if (!SendMessage(conn->fd, hdr, nullptr, 0, fds[i]).ok()) return false;
  }
  return true;
}

void QpCore::PushRecvCompletion(uint64_t wr_id, WcStatus status, WcOpcode opcode,
                                uint32_t byte_len, uint32_t imm, bool has_imm) {
  Completion c;
  c.wr_id = wr_id;
  c.status = status;
  c.opcode = opcode;
  c.byte_len = byte_len;
  c.imm_data = imm;
  c.has_imm = has_imm;
  c.qp_num = qp_num_;
  recv_cq_->Push(c);
}

// ---------------------------------------------------------------------------------------
// Responses on our link (initiator side) and peer loss.

void QpCore::OnResponse(const WireHeader& hdr, int fd) {
  switch (static_cast<MsgType>(hdr.type)) {
    case MsgType::kAck: {
      absl::MutexLock l(&mu_);
      SqEntry* e = FindSqLocked(hdr.seq);
      if (e != nullptr && !e->done) {
        e->done = true;
        e->status = WcStatus::kSuccess;
        DrainSqLocked();
      }
      break;
    }
    case MsgType::kNak: {
      absl::MutexLock l(&mu_);
      SqEntry* e = FindSqLocked(hdr.seq);
      if (e != nullptr && !e->done) FailWrLocked(hdr.seq, static_cast<WcStatus>(hdr.status));
      break;
    }
    case MsgType::kRegionRep: {
      std::shared_ptr<RemotePeer> remote = std::atomic_load(&remote_);
      if (!remote) break;
      absl::MutexLock l(&remote->reply_mu);
      if (remote->reply_fd >= 0) ::close(remote->reply_fd);
      remote->reply = hdr;
      remote->reply_fd = fd;
      fd = -1;
      remote->reply_ready = true;
      break;
    }
    default:
      std::fprintf(stderr, "soft: QP %u: unexpected message type %u on its link\n", qp_num_,
                   hdr.type);
      break;
  }
  if (fd >= 0) ::close(fd);
}

void QpCore::OnPeerGone() {
  {
    absl::MutexLock l(&mu_);
    if (!closed_ && state_ != QpState::kError) FailAllLocked(WcStatus::kRetryExceeded);
    else if (!closed_) FailAllLocked(WcStatus::kWrFlushError);
  }
  std::shared_ptr<RemotePeer> remote = std::atomic_load(&remote_);
  if (remote) {
    absl::MutexLock l(&remote->reply_mu);
    remote->gone = true;
  }
}

// ---------------------------------------------------------------------------------------
// Requests from the peer (target side, service thread).

void QpCore::Reply(const std::shared_ptr<Conn>& conn, const WireHeader& hdr, int pass_fd) {
  absl::MutexLock l(&conn->write_mu);
  (void)SendMessage(conn->fd, hdr, nullptr, 0, pass_fd);  // EOF is noticed by the reader.
}

bool QpCore::OnRequest(const std::shared_ptr<Conn>& conn, const WireHeader& hdr, int fd) {
  if (fd >= 0) ::close(fd);
  switch (static_cast<MsgType>(hdr.type)) {
    case MsgType::kSend:
      return HandleSend(conn, hdr);
    case MsgType::kWriteImm:
      HandleWriteImm(conn, hdr);
      return true;
    case MsgType::kRegionReq:
      HandleRegionReq(conn, hdr);
      return true;
    case MsgType::kAccessError: {
      // As on an HCA, the responder of a remote access violation enters ERROR too, and its
      // owner learns why from an affiliated asynchronous event.
      // The event goes first, so an owner that sees the flushed receives can find it --
      // unless the device imitates HCAs whose QP events trail the completions
      // (async_event_delay: then the flush goes first).
      const absl::Duration delay = pd_->dev->async_event_delay();
      if (delay > absl::ZeroDuration()) {
        {
          absl::MutexLock l(&mu_);
          if (closed_) return true;
          FailAllLocked(WcStatus::kWrFlushError);
        }
        absl::SleepFor(delay);
      }
      {
        absl::MutexLock l(&mu_);
        if (closed_) return true;
      }
      pd_->dev->PushAsyncEvent(AsyncEvent{AsyncEventType::kQpAccessError, qp_num_});
      absl::MutexLock l(&mu_);
      if (!closed_) FailAllLocked(WcStatus::kWrFlushError);
      return true;
    }
    default:
      std::fprintf(stderr, "soft: QP %u: unexpected request type %u\n", qp_num_, hdr.type);
      return false;
  }
}

bool QpCore::TakeRecvLocked(WireHeader* rep, uint64_t* wr_id, size_t* slot) {
  if (closed_ || state_ == QpState::kError || state_ == QpState::kReset) {
    rep->status = static_cast<uint32_t>(WcStatus::kRetryExceeded);
    return false;
  }
  if (!rq_.Take(wr_id, slot)) {
    rep->status = static_cast<uint32_t>(WcStatus::kRnrRetryExceeded);
    return false;
  }
  return true;
}

bool QpCore::HandleSend(const std::shared_ptr<Conn>& conn, const WireHeader& hdr) {
  const uint32_t len = hdr.a;
  WireHeader rep;
  rep.seq = hdr.seq;
  rep.type = static_cast<uint32_t>(MsgType::kNak);
  uint64_t wr_id = 0;
  size_t slot = 0;
  {
    absl::MutexLock l(&mu_);
    if (TakeRecvLocked(&rep, &wr_id, &slot)) {
      const std::vector<Sge>& sges = rq_sges_[slot];
      uint64_t capacity = 0;
      for (const Sge& s : sges) capacity += s.length;
      if (len > capacity) {
        PushRecvCompletion(wr_id, WcStatus::kLocalLengthError, WcOpcode::kRecv, len, 0, false);
        FailAllLocked(WcStatus::kWrFlushError);
        rep.status = static_cast<uint32_t>(WcStatus::kRemoteInvalidRequest);
      } else if (CheckLocalSges(sges.data(), static_cast<uint32_t>(sges.size()), true) !=
                 WcStatus::kSuccess) {
        PushRecvCompletion(wr_id, WcStatus::kLocalProtectionError, WcOpcode::kRecv, 0, 0,
                           false);
        FailAllLocked(WcStatus::kWrFlushError);
        rep.status = static_cast<uint32_t>(WcStatus::kRemoteOperationError);
      } else {
        // Scatter the payload straight from the socket into the receive buffers.
        uint32_t left = len;
        for (const Sge& s : sges) {
          if (left == 0) break;
          uint32_t n = std::min(left, s.length);
          if (!RecvExact(conn->fd, reinterpret_cast<void*>(s.addr), n).ok()) {
            PushRecvCompletion(wr_id, WcStatus::kWrFlushError, WcOpcode::kRecv, 0, 0, false);
            return false;
          }
          left -= n;
        }
        PushRecvCompletion(wr_id, WcStatus::kSuccess, WcOpcode::kRecv, len,
                           hdr.b, hdr.c != 0);
        rep.type = static_cast<uint32_t>(MsgType::kAck);
        rep.status = 0;
      }
    }
  }
  if (rep.type == static_cast<uint32_t>(MsgType::kNak) && len > 0) {
    if (!RecvExact(conn->fd, nullptr, len).ok()) return false;  // Keep the stream in sync.
  }
  Reply(conn, rep);
  return true;
}

void QpCore::HandleWriteImm(const std::shared_ptr<Conn>& conn, const WireHeader& hdr) {
  WireHeader rep;
  rep.seq = hdr.seq;
  rep.type = static_cast<uint32_t>(MsgType::kNak);
  uint64_t wr_id = 0;
  size_t slot = 0;
  {
    absl::MutexLock l(&mu_);
    if (TakeRecvLocked(&rep, &wr_id, &slot)) {
      PushRecvCompletion(wr_id, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm, hdr.a, hdr.b,
                         true);
      rep.type = static_cast<uint32_t>(MsgType::kAck);
      rep.status = 0;
    }
  }
  Reply(conn, rep);
}

void QpCore::HandleRegionReq(const std::shared_ptr<Conn>& conn, const WireHeader& hdr) {
  WireHeader rep;
  rep.type = static_cast<uint32_t>(MsgType::kRegionRep);
  rep.a = hdr.a;
  uint64_t uid = 0;
  int fd = -1;
  RegionView view;
  // Only regions of this QP's PD that allow some remote access are shared.
  if (pd_->dev->LookupLocal(hdr.a, &view) && view.pd_id == pd_->id &&
      (view.access & (kRemoteWrite | kRemoteRead))) {
    fd = pd_->dev->DupRegionFd(hdr.a, &uid);
  }
  rep.status = fd >= 0 ? 0 : 1;
  rep.c = uid;
  Reply(conn, rep, fd);
  if (fd >= 0) ::close(fd);
}

// ---------------------------------------------------------------------------------------

SoftQp::SoftQp(std::shared_ptr<QpCore> core) : core_(std::move(core)) {
  qp_num_ = core_->qp_num();
  max_inline_data_ = core_->max_inline_data();
}

SoftQp::~SoftQp() { core_->Close(); }

absl::Status SoftQp::Close() {
  core_->Close();
  return absl::OkStatus();
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr
