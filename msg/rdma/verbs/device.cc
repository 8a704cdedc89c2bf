// Provider-independent parts of the device layer: names, endpoint encoding, the blocking
// completion wait and Connect().
#include "msg/rdma/verbs/device.h"

#include <poll.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "msg/base/errno_status.h"

namespace msgr {
namespace verbs {

const char* WcStatusName(WcStatus status) {
  switch (status) {
    case WcStatus::kSuccess: return "SUCCESS";
    case WcStatus::kLocalLengthError: return "LOCAL_LENGTH_ERROR";
    case WcStatus::kLocalQpOperationError: return "LOCAL_QP_OPERATION_ERROR";
    case WcStatus::kLocalProtectionError: return "LOCAL_PROTECTION_ERROR";
    case WcStatus::kWrFlushError: return "WR_FLUSH_ERROR";
    case WcStatus::kRemoteInvalidRequest: return "REMOTE_INVALID_REQUEST";
    case WcStatus::kRemoteAccessError: return "REMOTE_ACCESS_ERROR";
    case WcStatus::kRemoteOperationError: return "REMOTE_OPERATION_ERROR";
    case WcStatus::kRetryExceeded: return "RETRY_EXCEEDED";
    case WcStatus::kRnrRetryExceeded: return "RNR_RETRY_EXCEEDED";
    case WcStatus::kGeneralError: return "GENERAL_ERROR";
  }
  return "UNKNOWN";
}

const char* WcOpcodeName(WcOpcode opcode) {
  switch (opcode) {
    case WcOpcode::kSend: return "SEND";
    case WcOpcode::kRdmaWrite: return "RDMA_WRITE";
    case WcOpcode::kRdmaRead: return "RDMA_READ";
    case WcOpcode::kRecv: return "RECV";
    case WcOpcode::kRecvRdmaWithImm: return "RECV_RDMA_WITH_IMM";
  }
  return "UNKNOWN";
}

const char* QpStateName(QpState state) {
  switch (state) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kError: return "ERROR";
  }
  return "UNKNOWN";
}

const char* AsyncEventName(AsyncEventType type) {
  switch (type) {
    case AsyncEventType::kQpFatal: return "QP_FATAL";
    case AsyncEventType::kQpRequestError: return "QP_REQ_ERR";
    case AsyncEventType::kQpAccessError: return "QP_ACCESS_ERR";
    case AsyncEventType::kPortActive: return "PORT_ACTIVE";
    case AsyncEventType::kPortError: return "PORT_ERR";
    case AsyncEventType::kDeviceFatal: return "DEVICE_FATAL";
    case AsyncEventType::kOther: return "OTHER";
  }
  return "UNKNOWN";
}

// ---------------------------------------------------------------------------------------
// QpEndpoint wire form: magic u32 | qp_num u32 | psn u32 | gid[16] | lid u16 | mtu u32 |
// locator_len u16 | locator bytes. All little-endian.
namespace {

constexpr uint32_t kEndpointMagic = 0x31504551;  // "QEP1"
constexpr size_t kEndpointFixedBytes = 4 + 4 + 4 + 16 + 2 + 4 + 2;
constexpr size_t kMaxLocatorBytes = 1024;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

std::string QpEndpoint::Serialize() const {
  std::string out;
  out.reserve(kEndpointFixedBytes + locator.size());
  PutLe(&out, kEndpointMagic, 4);
  PutLe(&out, qp_num, 4);
  PutLe(&out, psn, 4);
  out.append(reinterpret_cast<const char*>(gid.data()), gid.size());
  PutLe(&out, lid, 2);
  PutLe(&out, mtu, 4);
  PutLe(&out, locator.size(), 2);
  out.append(locator);
  return out;
}

absl::StatusOr<QpEndpoint> QpEndpoint::Parse(absl::string_view bytes) {
  if (bytes.size() < kEndpointFixedBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("QpEndpoint: ", bytes.size(), " bytes, need at least ", kEndpointFixedBytes));
  }
  const char* p = bytes.data();
  if (GetLe(p, 4) != kEndpointMagic) return absl::InvalidArgumentError("QpEndpoint: bad magic");
  QpEndpoint ep;
  ep.qp_num = static_cast<uint32_t>(GetLe(p + 4, 4));
  ep.psn = static_cast<uint32_t>(GetLe(p + 8, 4));
  std::memcpy(ep.gid.data(), p + 12, 16);
  ep.lid = static_cast<uint16_t>(GetLe(p + 28, 2));
  ep.mtu = static_cast<uint32_t>(GetLe(p + 30, 4));
  size_t loc_len = GetLe(p + 34, 2);
  if (loc_len > kMaxLocatorBytes || bytes.size() != kEndpointFixedBytes + loc_len) {
    return absl::InvalidArgumentError(absl::StrCat("QpEndpoint: locator length ", loc_len,
                                                   " does not match ", bytes.size(), " bytes"));
  }
  ep.locator.assign(p + kEndpointFixedBytes, loc_len);
  if (ep.psn > 0xffffff) return absl::InvalidArgumentError("QpEndpoint: psn wider than 24 bits");
  return ep;
}

std::string QpEndpoint::DebugString() const {
  std::string gid_hex;
  for (size_t i = 0; i < gid.size(); ++i) {
    absl::StrAppendFormat(&gid_hex, "%02x%s", gid[i], (i % 2 == 1 && i + 1 < gid.size()) ? ":" : "");
  }
  return absl::StrFormat("qp_num=%u psn=%06x lid=%u mtu=%u gid=%s locator=%s", qp_num, psn, lid,
                         mtu, gid_hex, locator.empty() ? "-" : locator);
}

// ---------------------------------------------------------------------------------------
absl::StatusOr<int> CompletionQueue::WaitForCompletion(Completion* out, int max,
                                                       absl::Duration timeout) {
  int n = Poll(out, max);
  if (n != 0) {
    if (n < 0) return absl::InternalError("completion queue failed (overrun)");
    return n;
  }
  absl::Status st = RequestNotify();
  if (!st.ok()) return st;
  // A completion may have arrived before the channel was armed.
  n = Poll(out, max);
  if (n != 0) {
    if (n < 0) return absl::InternalError("completion queue failed (overrun)");
    return n;
  }
  struct pollfd pfd = {event_fd(), POLLIN, 0};
  int64_t ms = absl::ToInt64Milliseconds(timeout);
  if (timeout == absl::InfiniteDuration()) ms = -1;
  int r;
  do {
    r = ::poll(&pfd, 1, static_cast<int>(ms));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return ErrnoStatus(errno, "poll(completion channel)");
  if (r > 0) ConsumeEvents();
  n = Poll(out, max);
  if (n < 0) return absl::InternalError("completion queue failed (overrun)");
  return n;
}

absl::Status QueuePair::Connect(const QpEndpoint& remote) {
  absl::Status st = ModifyToRtr(remote);
  if (!st.ok()) return st;
  return ModifyToRts();
}

}  // namespace verbs
}  // namespace msgr
