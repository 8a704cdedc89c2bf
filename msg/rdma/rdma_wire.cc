#include "msg/rdma/rdma_wire.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "msg/base/crc32c.h"
#include "msg/base/wire.h"

namespace msgr::rdma {
namespace {

constexpr size_t kMaxEndpointBytes = 1024;

absl::Status Bad(const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("bad RDMA ", what, " payload"));
}

}  // namespace

std::string EncodeClientSetup(const ClientSetup& s) {
  std::string out;
  WireWriter w(&out);
  w.PutString16(s.endpoint);
  w.Put(s.ctrl_addr);
  w.Put(s.ctrl_rkey);
  w.Put(s.ctrl_bytes);
  w.Put(s.recv_buffers);
  w.Put(s.buffer_bytes);
  if (s.want_record_imm) w.Put(uint8_t{1});
  return out;
}

absl::StatusOr<ClientSetup> DecodeClientSetup(std::string_view b) {
  WireReader r(b);
  ClientSetup s;
  if (!r.GetString16(kMaxEndpointBytes, &s.endpoint) || !r.Get(&s.ctrl_addr) ||
      !r.Get(&s.ctrl_rkey) || !r.Get(&s.ctrl_bytes) || !r.Get(&s.recv_buffers) ||
      !r.Get(&s.buffer_bytes)) {
    return Bad("client setup");
  }
  if (r.remaining() > 0) {  // the trailing flag (PROTOCOL.md "Record notifications")
    uint8_t want = 0;
    if (!r.Get(&want) || want > 1) return Bad("client setup");
    s.want_record_imm = want == 1;
  }
  if (r.remaining() != 0) return Bad("client setup");
  return s;
}

std::string EncodeServerSetup(const ServerSetup& s) {
  std::string out;
  WireWriter w(&out);
  w.PutString16(s.endpoint);
  w.Put(s.ring_addr);
  w.Put(s.ring_rkey);
  w.Put(s.ring_bytes);
  w.Put(s.ring_next_seq);
  w.Put(s.ring_next_pos);
  w.Put(s.sleep_word);
  w.Put(s.recv_buffers);
  w.Put(s.buffer_bytes);
  if (s.record_imm_credits > 0) w.Put(s.record_imm_credits);
  return out;
}

absl::StatusOr<ServerSetup> DecodeServerSetup(std::string_view b) {
  WireReader r(b);
  ServerSetup s;
  if (!r.GetString16(kMaxEndpointBytes, &s.endpoint) || !r.Get(&s.ring_addr) ||
      !r.Get(&s.ring_rkey) || !r.Get(&s.ring_bytes) || !r.Get(&s.ring_next_seq) ||
      !r.Get(&s.ring_next_pos) || !r.Get(&s.sleep_word) || !r.Get(&s.recv_buffers) ||
      !r.Get(&s.buffer_bytes)) {
    return Bad("server setup");
  }
  if (r.remaining() > 0 && (!r.Get(&s.record_imm_credits) || s.record_imm_credits == 0 ||
                            s.record_imm_credits >= s.recv_buffers)) {
    return Bad("server setup");
  }
  if (r.remaining() != 0) return Bad("server setup");
  return s;
}

// Layout: 0 magic u32 | 4 kind u8 | 5 flags u8 | 6 msg_type u16 | 8 credits u32 |
// 12 frag_len u32 | 16 seq u64 | 24 ack_seq u64 | 32 total_len u32 | 36 header_crc u32.
void EncodeSendHeader(const SendHeader& h, uint8_t* out) {
  StoreLe<uint32_t>(out + 0, kSendMagic);
  out[4] = static_cast<uint8_t>(h.kind);
  out[5] = h.flags;
  StoreLe<uint16_t>(out + 6, h.msg_type);
  StoreLe<uint32_t>(out + 8, h.credits);
  StoreLe<uint32_t>(out + 12, h.frag_len);
  StoreLe<uint64_t>(out + 16, h.seq);
  StoreLe<uint64_t>(out + 24, h.ack_seq);
  StoreLe<uint32_t>(out + 32, h.total_len);
  StoreLe<uint32_t>(out + 36, Crc32c(0, out, 36));
}

absl::Status DecodeSendHeader(const uint8_t* in, size_t received, SendHeader* out) {
  if (received < kSendHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("RDMA SEND of ", received, " bytes is "
                                                   "shorter than its header"));
  }
  if (LoadLe<uint32_t>(in) != kSendMagic) {
    return absl::InvalidArgumentError("RDMA SEND with bad magic");
  }
  if (LoadLe<uint32_t>(in + 36) != Crc32c(0, in, 36)) {
    return absl::DataLossError("RDMA SEND header crc mismatch");
  }
  out->kind = static_cast<SendKind>(in[4]);
  out->flags = in[5];
  out->msg_type = LoadLe<uint16_t>(in + 6);
  out->credits = LoadLe<uint32_t>(in + 8);
  out->frag_len = LoadLe<uint32_t>(in + 12);
  out->seq = LoadLe<uint64_t>(in + 16);
  out->ack_seq = LoadLe<uint64_t>(in + 24);
  out->total_len = LoadLe<uint32_t>(in + 32);
  if (out->kind != SendKind::kFragment && out->kind != SendKind::kControl) {
    return absl::InvalidArgumentError("RDMA SEND of unknown kind");
  }
  if (kSendHeaderBytes + static_cast<size_t>(out->frag_len) != received ||
      (out->kind == SendKind::kControl && out->frag_len != 0) ||
      out->frag_len > out->total_len) {
    return absl::InvalidArgumentError("RDMA SEND length does not match its header");
  }
  return absl::OkStatus();
}

}  // namespace msgr::rdma
