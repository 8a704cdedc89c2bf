// Soft QP: the send and receive posting paths. RDMA WRITE/READ are executed here, by the
// posting thread: validate against the peer's region table, then memcpy straight into (or
// out of) the peer's shared region. No message, no peer CPU.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "msg/rdma/verbs/soft/soft_qp.h"

namespace msgr {
namespace verbs {
namespace soft {

namespace {

constexpr uint32_t kMaxInlineData = 4096;
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;
constexpr absl::Duration kRegionFetchTimeout = absl::Seconds(5);

WcOpcode CompletionOpcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return WcOpcode::kSend;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
  }
  return WcOpcode::kSend;
}

}  // namespace

uint32_t QpCore::max_inline_data() const {
  return std::min(config_.max_inline_data, kMaxInlineData);
}

absl::Status QpCore::ValidateSendWr(const SendWr& wr) const {
  if (wr.num_sge > config_.max_send_sge) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_sge ", wr.num_sge, " > max_send_sge ", config_.max_send_sge));
  }
  if (wr.num_sge > 0 && wr.sg_list == nullptr) {
    return absl::InvalidArgumentError("num_sge > 0 but sg_list is null");
  }
  switch (wr.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
    case WrOpcode::kRdmaRead:
      break;
    default:
      return absl::InvalidArgumentError("unknown opcode");
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  if (total > kMaxMessageBytes) return absl::InvalidArgumentError("message larger than 2 GiB");
  if (wr.flags & kInline) {
    if (wr.opcode == WrOpcode::kRdmaRead) {
      return absl::InvalidArgumentError("kInline is not allowed on RDMA READ");
    }
    if (total > max_inline_data()) {
      return absl::InvalidArgumentError(absl::StrCat("inline payload ", total,
                                                     " > max_inline_data ", max_inline_data()));
    }
  }
  return absl::OkStatus();
}

absl::Status QpCore::PostSend(absl::Span<const SendWr> wrs, size_t* posted) {
  if (posted != nullptr) *posted = 0;
  absl::MutexLock pl(&post_mu_);
  for (size_t i = 0; i < wrs.size(); ++i) {
    const SendWr& wr = wrs[i];
    absl::Status st = ValidateSendWr(wr);
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("soft: PostSend WR ", i, ": ", st.message()));
    }
    uint32_t total = 0;
    for (uint32_t s = 0; s < wr.num_sge; ++s) total += wr.sg_list[s].length;
    uint64_t seq;
    bool in_error = false;
    // WRITE_WITH_IMM completes at the peer through its shared queues, unless a WR ahead of
    // it still waits for the peer's ACK: then it goes behind that one, on the socket.
    bool direct_imm = false;
    {
      absl::MutexLock l(&mu_);
      if (closed_) return absl::FailedPreconditionError("soft: QP is closed");
      if (state_ != QpState::kRts && state_ != QpState::kError) {
        return absl::FailedPreconditionError(
            absl::StrCat("soft: PostSend needs RTS, QP is ", QpStateName(state_)));
      }
      if (sq_used_ >= config_.max_send_wr) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "soft: send queue full (", config_.max_send_wr,
            " WRs not yet retired: poll, and signal at least every max_send_wr WRs)"));
      }
      seq = next_seq_++;
      SqEntry e;
      e.seq = seq;
      e.wr_id = wr.wr_id;
      e.opcode = CompletionOpcode(wr.opcode);
      e.byte_len = total;
      e.signaled = (wr.flags & kSignaled) != 0;
      in_error = state_ == QpState::kError;
      if (wr.opcode == WrOpcode::kRdmaWriteWithImm) direct_imm = !AwaitingAckLocked();
      if (wr.opcode == WrOpcode::kSend || wr.opcode == WrOpcode::kSendWithImm ||
          (wr.opcode == WrOpcode::kRdmaWriteWithImm && !direct_imm)) {
        awaiting_ack_wr_ = seq;
      }
      if (in_error) {
        e.done = true;
        e.status = WcStatus::kWrFlushError;
      }
      sq_.push_back(e);
      ++sq_used_;
      if (in_error) DrainSqLocked();
    }
    if (posted != nullptr) *posted = i + 1;
    if (in_error) continue;

    WcStatus status = WcStatus::kSuccess;
    bool awaits_ack = false;
    switch (wr.opcode) {
      case WrOpcode::kSend:
      case WrOpcode::kSendWithImm:
        status = ExecuteSend(wr, seq, total);
        awaits_ack = true;
        break;
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaRead:
        status = ExecuteRdma(wr, total);
        break;
      case WrOpcode::kRdmaWriteWithImm:
        status = ExecuteRdma(wr, total);
        if (status == WcStatus::kSuccess && direct_imm) {
          // The data is visible (ExecuteRdma's fence) before the completion is.
          status = remote_->rq->DeliverWriteImm(*remote_->cq, remote_->qp_num, total,
                                                wr.imm_data);
        } else if (status == WcStatus::kSuccess) {
          WireHeader hdr;
          hdr.type = static_cast<uint32_t>(MsgType::kWriteImm);
          hdr.seq = seq;
          hdr.a = total;
          hdr.b = wr.imm_data;
          absl::MutexLock wl(&remote_->link->write_mu);
          if (!SendMessage(remote_->link->fd, hdr).ok()) status = WcStatus::kRetryExceeded;
          awaits_ack = true;
        }
        break;
    }
    {
      absl::MutexLock l(&mu_);
      SqEntry* e = FindSqLocked(seq);
      if (e != nullptr && !e->done) {
        if (status != WcStatus::kSuccess) {
          FailWrLocked(seq, status);
        } else if (!awaits_ack) {
          e->done = true;
          DrainSqLocked();
        }
      }
    }
    if (status == WcStatus::kRemoteAccessError) NotifyPeer(MsgType::kAccessError);
  }
  return absl::OkStatus();
}

WcStatus QpCore::CheckLocalSges(const Sge* sges, uint32_t n, bool need_write) const {
  for (uint32_t i = 0; i < n; ++i) {
    const Sge& s = sges[i];
    if (s.length == 0) continue;
    RegionView v;
    if (!pd_->dev->LookupLocal(s.lkey, &v) || v.pd_id != pd_->id ||
        (need_write && !(v.access & kLocalWrite)) || s.addr < v.base ||
        s.addr - v.base > v.length || s.length > v.length - (s.addr - v.base)) {
      return WcStatus::kLocalProtectionError;
    }
  }
  return WcStatus::kSuccess;
}

WcStatus QpCore::ExecuteSend(const SendWr& wr, uint64_t seq, uint32_t total) {
  if (!(wr.flags & kInline)) {
    WcStatus st = CheckLocalSges(wr.sg_list, wr.num_sge, false);
    if (st != WcStatus::kSuccess) return st;
  }
  struct iovec iov[64];
  int n = 0;
  for (uint32_t i = 0; i < wr.num_sge && n < 64; ++i) {
    iov[n].iov_base = reinterpret_cast<void*>(wr.sg_list[i].addr);
    iov[n].iov_len = wr.sg_list[i].length;
    ++n;
  }
  WireHeader hdr;
  hdr.type = static_cast<uint32_t>(MsgType::kSend);
  hdr.seq = seq;
  hdr.a = total;
  hdr.b = wr.imm_data;
  hdr.c = wr.opcode == WrOpcode::kSendWithImm ? 1 : 0;
  absl::MutexLock wl(&remote_->link->write_mu);
  if (!SendMessage(remote_->link->fd, hdr, iov, n).ok()) return WcStatus::kRetryExceeded;
  return WcStatus::kSuccess;
}

WcStatus QpCore::ExecuteRdma(const SendWr& wr, uint32_t total) {
  const bool read = wr.opcode == WrOpcode::kRdmaRead;
  if (read || !(wr.flags & kInline)) {
    WcStatus st = CheckLocalSges(wr.sg_list, wr.num_sge, /*need_write=*/read);
    if (st != WcStatus::kSuccess) return st;
  }
  if (total == 0) return WcStatus::kSuccess;  // Zero-length: no remote access, no rkey check.
  RemotePeer& peer = *remote_;
  RegionView v;
  const uint32_t need = read ? kRemoteRead : kRemoteWrite;
  if (!peer.table.Lookup(wr.rkey, &v) || v.pd_id != peer.pd_id || !(v.access & need) ||
      wr.remote_addr < v.base || wr.remote_addr - v.base > v.length ||
      total > v.length - (wr.remote_addr - v.base)) {
    return WcStatus::kRemoteAccessError;
  }
  RemotePeer::Mapping* m = nullptr;
  WcStatus st = MapRemote(v, &m);
  if (st != WcStatus::kSuccess) return st;
  uint8_t* p = m->base + (wr.remote_addr - v.base);
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const Sge& s = wr.sg_list[i];
    if (read) {
      std::memcpy(reinterpret_cast<void*>(s.addr), p, s.length);
    } else {
      std::memcpy(p, reinterpret_cast<const void*>(s.addr), s.length);
    }
    p += s.length;
  }
  // WRs of one QP become visible in order (x86 stores are ordered; this keeps the compiler
  // and weaker CPUs honest).
  std::atomic_thread_fence(std::memory_order_release);
  return WcStatus::kSuccess;
}

WcStatus QpCore::MapRemote(const RegionView& view, RemotePeer::Mapping** out) {
  RemotePeer& peer = *remote_;
  auto it = peer.mappings.find(view.uid);
  if (it != peer.mappings.end()) {
    *out = &it->second;
    return WcStatus::kSuccess;
  }
  // First use of this region: ask the peer's device for its memfd.
  {
    absl::MutexLock l(&peer.reply_mu);
    if (peer.gone) return WcStatus::kRetryExceeded;
    peer.reply_ready = false;
  }
  WireHeader req;
  req.type = static_cast<uint32_t>(MsgType::kRegionReq);
  req.a = view.key;
  {
    absl::MutexLock wl(&peer.link->write_mu);
    if (!SendMessage(peer.link->fd, req).ok()) return WcStatus::kRetryExceeded;
  }
  WireHeader rep;
  int fd = -1;
  {
    absl::MutexLock l(&peer.reply_mu);
    auto ready = [&peer]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(peer.reply_mu) {
      return peer.reply_ready || peer.gone;
    };
    peer.reply_mu.AwaitWithTimeout(absl::Condition(&ready), kRegionFetchTimeout);
    if (!peer.reply_ready) return WcStatus::kRetryExceeded;
    rep = peer.reply;
    fd = peer.reply_fd;
    peer.reply_fd = -1;
    peer.reply_ready = false;
  }
  if (rep.status != 0 || fd < 0 || rep.a != view.key || rep.c != view.uid) {
    if (fd >= 0) ::close(fd);
    return WcStatus::kRemoteAccessError;  // Deregistered (or replaced) meanwhile.
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || static_cast<uint64_t>(sb.st_size) < view.length) {
    ::close(fd);
    return WcStatus::kRemoteAccessError;
  }
  size_t bytes = static_cast<size_t>(sb.st_size);
  // Populated once here, not one fault per page on the writes that follow.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return WcStatus::kRemoteOperationError;
  // Drop mappings of regions the peer has deregistered since.
  for (auto i = peer.mappings.begin(); i != peer.mappings.end();) {
    RegionView cur;
    if (!peer.table.Lookup(i->second.key, &cur) || cur.uid != i->first) {
      ::munmap(i->second.base, i->second.bytes);
      i = peer.mappings.erase(i);
    } else {
      ++i;
    }
  }
  RemotePeer::Mapping& m = peer.mappings[view.uid];
  m.key = view.key;
  m.base = static_cast<uint8_t*>(p);
  m.bytes = bytes;
  *out = &m;
  return WcStatus::kSuccess;
}

void QpCore::NotifyPeer(MsgType type) {
  WireHeader hdr;
  hdr.type = static_cast<uint32_t>(type);
  absl::MutexLock wl(&remote_->link->write_mu);
  (void)SendMessage(remote_->link->fd, hdr);
}

absl::Status QpCore::PostRecv(absl::Span<const RecvWr> wrs, size_t* posted) {
  if (posted != nullptr) *posted = 0;
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < wrs.size(); ++i) {
    const RecvWr& wr = wrs[i];
    if (wr.num_sge > config_.max_recv_sge || (wr.num_sge > 0 && wr.sg_list == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("soft: PostRecv WR ", i, ": num_sge ",
                                                     wr.num_sge, " > max_recv_sge ",
                                                     config_.max_recv_sge));
    }
    if (closed_) return absl::FailedPreconditionError("soft: QP is closed");
    if (state_ == QpState::kReset) {
      return absl::FailedPreconditionError("soft: PostRecv needs INIT or later");
    }
    if (state_ == QpState::kError) {
      PushRecvCompletion(wr.wr_id, WcStatus::kWrFlushError, WcOpcode::kRecv, 0, 0, false);
    } else {
      const int slot = rq_.Post(wr.wr_id);
      if (slot < 0) {
        return absl::ResourceExhaustedError(
            absl::StrCat("soft: receive queue full (", config_.max_recv_wr, ")"));
      }
      rq_sges_[slot].assign(wr.sg_list, wr.sg_list + wr.num_sge);
    }
    if (posted != nullptr) *posted = i + 1;
  }
  return absl::OkStatus();
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr
