#include "msg/rdma/transport.h"

#include <algorithm>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "msg/rdma/rdma_wire.h"

namespace msgr::rdma {

absl::StatusOr<std::shared_ptr<Transport>> Transport::Create(std::shared_ptr<DeviceContext> ctx,
                                                             const TransportConfig& config,
                                                             RegisteredBudget* budget,
                                                             const std::string& peer,
                                                             verbs::CompletionQueue* recv_cq,
                                                             std::shared_ptr<void> recv_cq_owner) {
  std::shared_ptr<Transport> t(new Transport(std::move(ctx), config));
  t->recv_cq_owner_ = recv_cq != nullptr ? std::move(recv_cq_owner) : nullptr;
  TransportConfig& c = t->config_;
  const verbs::DeviceAttr& attr = t->ctx_->device->attr();
  if (attr.max_qp_wr > 0) {
    c.sq_depth = std::min(c.sq_depth, attr.max_qp_wr);
    c.recv_buffers = std::min(c.recv_buffers, attr.max_qp_wr);
  }
  if (c.recv_buffers < 4 || c.send_buffers < 2 || c.sq_depth < 16 ||
      c.buffer_bytes < kSendHeaderBytes + 64) {
    return absl::InvalidArgumentError("RDMA transport: buffer pool too small");
  }
  c.signal_every = std::clamp<uint32_t>(c.signal_every, 1, c.sq_depth / 4);
  const size_t pool = static_cast<size_t>(c.buffer_bytes);
  const size_t scratch_bytes = 8 * static_cast<size_t>(c.sq_depth);
  verbs::ProtectionDomain* pd = t->ctx_->pd.get();
  auto cq = t->ctx_->device->CreateCq(static_cast<int>(c.sq_depth + c.recv_buffers + 16));
  if (!cq.ok()) return cq.status();
  t->cq_ = std::move(*cq);
  auto recv = AllocCharged(*budget, *pd, pool * c.recv_buffers, verbs::kLocalWrite,
                           absl::StrCat("the RECV pool of a connection with ", peer));
  if (!recv.ok()) return recv.status();
  t->recv_mr_ = std::move(*recv);
  auto send = AllocCharged(*budget, *pd, pool * c.send_buffers, verbs::kLocalWrite,
                           absl::StrCat("the SEND pool of a connection with ", peer));
  if (!send.ok()) return send.status();
  t->send_mr_ = std::move(*send);
  auto scratch = AllocCharged(*budget, *pd, scratch_bytes, verbs::kLocalWrite,
                              absl::StrCat("the WRITE word sources of a connection with ", peer));
  if (!scratch.ok()) return scratch.status();
  t->scratch_mr_ = std::move(*scratch);
  verbs::QpConfig qc;
  qc.send_cq = t->cq_.get();
  qc.recv_cq = recv_cq != nullptr ? recv_cq : t->cq_.get();
  qc.max_send_wr = c.sq_depth;
  qc.max_recv_wr = c.recv_buffers;
  qc.max_send_sge = 1;
  qc.max_recv_sge = 1;
  qc.max_inline_data = 64;
  auto qp = pd->CreateQp(qc);
  if (!qp.ok()) return qp.status();
  t->qp_ = std::move(*qp);
  t->registered_bytes_ =
      t->recv_mr_->length() + t->send_mr_->length() + t->scratch_mr_->length();
  {
    absl::MutexLock l(&t->mu_);
    for (int i = static_cast<int>(c.send_buffers) - 1; i >= 0; --i) t->free_send_.push_back(i);
  }
  return t;
}

Transport::~Transport() {
  Kill();
  if (qp_) (void)qp_->Close();
}

uint32_t Transport::fragment_bytes() const {
  return config_.buffer_bytes - static_cast<uint32_t>(kSendHeaderBytes);
}

absl::Status Transport::PostAllRecvs() {
  for (uint32_t i = 0; i < config_.recv_buffers; ++i) {
    if (absl::Status s = RepostRecv(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Transport::RepostRecv(uint32_t index) {
  const verbs::Sge sge =
      recv_mr_->Slice(static_cast<size_t>(index) * config_.buffer_bytes, config_.buffer_bytes);
  verbs::RecvWr wr;
  wr.wr_id = kRecvWrBit | index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return qp_->PostRecv(absl::MakeConstSpan(&wr, 1));
}

const uint8_t* Transport::recv_buffer(uint32_t index) const {
  return recv_mr_->data() + static_cast<size_t>(index) * config_.buffer_bytes;
}

int Transport::TakeSendBuffer() {
  absl::MutexLock l(&mu_);
  if (free_send_.empty()) return -1;
  const int i = free_send_.back();
  free_send_.pop_back();
  return i;
}

uint8_t* Transport::send_buffer(int index) const {
  return send_mr_->data() + static_cast<size_t>(index) * config_.buffer_bytes;
}

verbs::Sge Transport::SendBufferSge(int index, uint32_t len) const {
  return send_mr_->Slice(static_cast<size_t>(index) * config_.buffer_bytes, len);
}

int Transport::free_send_buffers() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(free_send_.size());
}

void Transport::ReturnSendBuffer(int index) {
  absl::MutexLock l(&mu_);
  free_send_.push_back(index);
}

absl::StatusOr<uint64_t> Transport::Post(absl::Span<const WrSpec> wrs) {
  absl::MutexLock l(&mu_);
  if (dead_) return absl::UnavailableError("RDMA queue pair is down");
  if (posted_ - retired_ + wrs.size() > config_.sq_depth - 1) {
    return absl::ResourceExhaustedError("RDMA send queue full");
  }
  const bool inline_words = qp_->max_inline_data() >= sizeof(uint64_t);
  // A record is 2-5 WRs (kMaxRecordWrs): no heap allocation on the data path.
  absl::InlinedVector<verbs::SendWr, 8> out(wrs.size());
  absl::InlinedVector<verbs::Sge, 8> sges(wrs.size());
  absl::InlinedVector<uint64_t, 8> words(wrs.size());
  for (size_t i = 0; i < wrs.size(); ++i) {
    const WrSpec& w = wrs[i];
    const uint64_t n = posted_ + 1 + i;
    verbs::SendWr& wr = out[i];
    wr.wr_id = n;
    wr.opcode = w.opcode;
    wr.imm_data = w.imm;
    wr.remote_addr = w.remote_addr;
    wr.rkey = w.rkey;
    if (w.signal || n % config_.signal_every == 0) wr.flags |= verbs::kSignaled;
    if (w.word) {
      if (inline_words) {
        words[i] = w.value;
        sges[i] = verbs::Sge{reinterpret_cast<uint64_t>(&words[i]), 8, 0};
        wr.flags |= verbs::kInline;
      } else {
        // Slot n % sq_depth is free again: WR n - sq_depth retired before WR n could post.
        const size_t off = static_cast<size_t>(n % config_.sq_depth) * 8;
        std::memcpy(scratch_mr_->data() + off, &w.value, 8);
        sges[i] = scratch_mr_->Slice(off, 8);
      }
    } else {
      sges[i] = w.sge;
    }
    wr.sg_list = &sges[i];
    wr.num_sge = sges[i].length == 0 ? 0 : 1;
  }
  size_t posted = 0;
  absl::Status s = qp_->PostSend(out, &posted);
  for (size_t i = 0; i < posted; ++i) {
    if (wrs[i].send_buffer >= 0) busy_send_.emplace_back(posted_ + 1 + i, wrs[i].send_buffer);
  }
  posted_ += posted;
  if (!s.ok()) {
    if (posted == 0) return s;
    // Part of the chain is out (e.g. a record without its seq word) and the rest was
    // refused: fail the QP rather than leave the chain half done.
    (void)qp_->ModifyToError();
    // After the QP is in error: dead() == true means the HCA reads no more payloads.
    dead_.store(true, std::memory_order_release);
    cv_.SignalAll();
    return absl::UnavailableError(absl::StrCat("RDMA post failed after ", posted, " of ",
                                               wrs.size(), " work requests: ", s.message()));
  }
  return posted_;
}

bool Transport::WaitForRoom(size_t n, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  while (!dead_ && posted_ - retired_ + n > config_.sq_depth - 1) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) return false;
  }
  return !dead_;
}

bool Transport::WaitRetired(uint64_t wr, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  while (!dead_ && retired_ < wr) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) return false;
  }
  return !dead_;
}

void Transport::OnSendCompleted(uint64_t wr) {
  absl::MutexLock l(&mu_);
  if (wr <= retired_) return;
  retired_.store(wr, std::memory_order_release);
  while (!busy_send_.empty() && busy_send_.front().first <= wr) {
    free_send_.push_back(busy_send_.front().second);
    busy_send_.pop_front();
  }
  cv_.SignalAll();
}

uint64_t Transport::posted() const {
  absl::MutexLock l(&mu_);
  return posted_;
}

uint64_t Transport::retired() const { return retired_.load(std::memory_order_acquire); }

void Transport::Kill() {
  absl::MutexLock l(&mu_);
  if (dead_) return;
  if (qp_) (void)qp_->ModifyToError();
  dead_.store(true, std::memory_order_release);  // after: see Post
  cv_.SignalAll();
}

bool Transport::dead() const { return dead_.load(std::memory_order_acquire); }

}  // namespace msgr::rdma
