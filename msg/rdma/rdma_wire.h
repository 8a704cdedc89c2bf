// The RDMA backend's own wire formats (msg/PROTOCOL.md, "RDMA"):
//
//   * the setup payloads exchanged over the TCP side channel after READY (QP endpoint,
//     receive pool geometry, the client's control region, the server's ring and its resume
//     point), carried in side-channel frames of type kMessage with msg_type kSetup*;
//   * the 40-byte header at the start of every SEND (message fragments, credit/ack updates,
//     doorbells);
//   * the layout of the client's control region, which the server RDMA-WRITEs.
//
// Pure functions and constants: thread-safe.
#ifndef MSGR_MSG_RDMA_RDMA_WIRE_H_
#define MSGR_MSG_RDMA_RDMA_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace msgr::rdma {

// Side-channel msg_type values (frames of type FrameType::kMessage, seq 0).
inline constexpr uint16_t kSetupClient = 0x5201;  // client -> server: ClientSetup
inline constexpr uint16_t kSetupServer = 0x5202;  // server -> client: ServerSetup
inline constexpr uint16_t kSetupReady = 0x5203;   // client -> server: QP is RTS, go

struct ClientSetup {
  std::string endpoint;     // verbs::QpEndpoint::Serialize()
  uint64_t ctrl_addr = 0;   // control region the server writes (ring credit, sleep word)
  uint32_t ctrl_rkey = 0;
  uint32_t ctrl_bytes = 0;
  uint32_t recv_buffers = 0;  // receives the client keeps posted (= server's send credits)
  uint32_t buffer_bytes = 0;  // size of each receive buffer
  // Trailing, optional: the client writes each record's seq WITH_IMM if the server has a
  // notifier for its ring (PROTOCOL.md "Record notifications").
  bool want_record_imm = false;
};

struct ServerSetup {
  std::string endpoint;
  uint64_t ring_addr = 0;  // 0: no ring
  uint32_t ring_rkey = 0;
  uint64_t ring_bytes = 0;
  uint64_t ring_next_seq = 1;  // first record seq the ring has not seen published
  uint64_t ring_next_pos = 0;  // its ring position
  uint64_t sleep_word = 0;     // current poller sleep word (see kCtrlSleepOffset)
  uint32_t recv_buffers = 0;
  uint32_t buffer_bytes = 0;
  // Trailing, optional: how many of `recv_buffers` the client may spend on record imms
  // (0: none; then it sends no record imm). The rest are its message credits.
  uint32_t record_imm_credits = 0;
};

std::string EncodeClientSetup(const ClientSetup& s);
std::string EncodeServerSetup(const ServerSetup& s);
absl::StatusOr<ClientSetup> DecodeClientSetup(std::string_view b);
absl::StatusOr<ServerSetup> DecodeServerSetup(std::string_view b);

// ---------------------------------------------------------------------------------------
// SEND header: every SEND starts with it; a message fragment's bytes follow.
inline constexpr uint32_t kSendMagic = 0x53444d52;  // "RMDS" in memory
inline constexpr size_t kSendHeaderBytes = 40;

enum class SendKind : uint8_t {
  kFragment = 1,  // part of a Message (seq > 0); flags say first/last
  kControl = 2,   // credits / ack / doorbell only, no body
};
inline constexpr uint8_t kSendFirst = 1u << 0;
inline constexpr uint8_t kSendLast = 1u << 1;
inline constexpr uint8_t kSendDoorbell = 1u << 2;  // wake the receiver's ring poller
// Control SENDs only, client -> OSD: "my completion thread goes to sleep; write the next
// ring credit WITH_IMM". `seq` carries the credit the client has seen: if the OSD's differs,
// it writes (WITH_IMM) at once (PROTOCOL.md "Credit wake-ups").
inline constexpr uint8_t kSendWantCreditWakeup = 1u << 3;

// Zero-length RDMA WRITE_WITH_IMMs, client -> OSD, in place of a CONTROL SEND when nothing
// else is owed (PROTOCOL.md "Doorbells", "Credit wake-ups"): the top bit of the immediate
// says which, the other 31 bits carry the low bits of a doorbell's last record seq
// (informational) or of the ring credit the client has seen (a wake-up request's `seq`).
inline constexpr uint32_t kImmWantCreditWakeup = 1u << 31;  // else: a doorbell
inline constexpr uint32_t kImmValueMask = kImmWantCreditWakeup - 1;

struct SendHeader {
  SendKind kind = SendKind::kControl;
  uint8_t flags = 0;
  uint16_t msg_type = 0;
  uint32_t credits = 0;    // receive buffers the sender re-posted since its last header
  uint32_t frag_len = 0;   // body bytes after the header
  uint64_t seq = 0;        // message seq (fragments of one message share it)
  uint64_t ack_seq = 0;    // last message seq the sender received completely
  uint32_t total_len = 0;  // whole message length (on every fragment)
};

void EncodeSendHeader(const SendHeader& h, uint8_t* out);  // writes kSendHeaderBytes
// Checks magic, header crc, kind and that frag_len fits in `received` bytes.
absl::Status DecodeSendHeader(const uint8_t* in, size_t received, SendHeader* out);

// ---------------------------------------------------------------------------------------
// The client's control region (one page, registered kLocalWrite | kRemoteWrite). Words the
// server writes with 8-byte RDMA WRITEs; each on its own cache line.
inline constexpr size_t kCtrlRegionBytes = 4096;
inline constexpr size_t kCtrlCreditOffset = 0;   // u64: ring position released by the OSD
inline constexpr size_t kCtrlSleepOffset = 64;   // u64: poller sleep word, odd = sleeping
// u64: record-imm receives the OSD re-posted on the current link (the client's record-imm
// credits that came back; PROTOCOL.md "Record notifications"). The client zeroes it on
// every new link.
inline constexpr size_t kCtrlImmOffset = 128;
static_assert(kCtrlImmOffset + 8 <= kCtrlRegionBytes);

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RDMA_WIRE_H_
