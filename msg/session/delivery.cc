#include "msg/session/delivery.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "msg/ring/ring_format.h"

namespace msgr::session {

absl::Status ClosedError(absl::string_view peer) {
  return absl::FailedPreconditionError(
      absl::StrCat("connection to ", peer, " is closed (marked down or reset)"));
}

absl::Status MarkedDownError(absl::string_view peer) {
  return absl::CancelledError(absl::StrCat("connection to ", peer, " marked down"));
}

absl::Status ReconnectTimeoutError(absl::string_view peer, absl::Duration timeout) {
  return absl::DeadlineExceededError(absl::StrCat(
      peer, " did not reconnect within ", absl::FormatDuration(timeout), "; session ended"));
}

absl::Status ReplacedError(const EntityName& peer, absl::string_view addr) {
  return absl::UnavailableError(
      absl::StrCat(peer.ToString(), " restarted (new session from ", addr, ")"));
}

uint32_t OutgoingRecordCrc(const RecordDesc& desc, const void* oid, const void* payload,
                           size_t len, LiveMessengerCounters* c) {
  if (desc.payload_crc.has_value()) return *desc.payload_crc;
  c->record_crc_bytes_tx += len;
  return RecordPayloadCrc(oid, desc.oid.size(), payload, len);
}

absl::Status CheckOutgoingMessage(const Message& m, const MessengerOptions& options) {
  if (m.type >= kReservedMessageTypes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("message type %#x is reserved for the messenger", m.type));
  }
  if (m.payload.size() > options.max_message_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("message of %d bytes is over max_message_bytes (%d)", m.payload.size(),
                        options.max_message_bytes));
  }
  return absl::OkStatus();
}

bool FlowWindow::Admits(uint64_t bytes, uint64_t messenger_bytes,
                        const MessengerOptions& o) const {
  if (msgs_ + 1 > o.conn_max_msgs_in_flight) return false;
  if (bytes_ == 0) return true;  // one message always fits an empty session
  return bytes_ + bytes <= o.conn_max_bytes_in_flight &&
         messenger_bytes + bytes <= o.messenger_max_bytes_in_flight;
}

absl::Status FlowWindow::Refusal(const std::string& peer, const MessengerOptions& o) const {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "connection to %s is over its flow-control limit (%d messages / %d bytes in flight, "
      "limits %d / %d)",
      peer, msgs_, bytes_, o.conn_max_msgs_in_flight, o.conn_max_bytes_in_flight));
}

void FlowWindow::Add(uint64_t bytes, std::atomic<uint64_t>* messenger_bytes) {
  ++msgs_;
  bytes_ += bytes;
  *messenger_bytes += bytes;
}

void FlowWindow::Release(uint64_t bytes, std::atomic<uint64_t>* messenger_bytes) {
  --msgs_;
  bytes_ -= bytes;
  *messenger_bytes -= bytes;
}

void FlowWindow::Clear(std::atomic<uint64_t>* messenger_bytes) {
  *messenger_bytes -= bytes_;
  bytes_ = 0;
  msgs_ = 0;
}

absl::Status GapError(uint64_t seq, uint64_t in_seq) {
  return absl::InvalidArgumentError(
      absl::StrFormat("data frame seq %d out of order (expected %d)", seq, in_seq + 1));
}

absl::Status CheckPeerInSeq(uint64_t peer_in_seq, uint64_t out_seq) {
  if (peer_in_seq <= out_seq) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "peer says it received seq %d but we only sent up to %d", peer_in_seq, out_seq));
}

}  // namespace msgr::session
