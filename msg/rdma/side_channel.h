// The TCP side channel of an RDMA connection ("TCP for control, RDMA for data"): the
// authenticated handshake and the RDMA setup exchange run over it as msgr frames
// (msg/frame.h); afterwards it stays open so that a peer that dies or closes is noticed at
// once (EOF), and carries one last CLOSE frame on MarkDown.
//
// SideChannel wraps one socket: deadline-bounded writes, frames read as they arrive
// (ReadAvailable) or with a deadline (ReadFrame), and a connect that need not wait.
// Thread-safety: one reader and one writer at a time (the completion thread during setup
// and after; any thread may write CLOSE or a keepalive answer, writes never interleave).
#ifndef MSGR_MSG_RDMA_SIDE_CHANNEL_H_
#define MSGR_MSG_RDMA_SIDE_CHANNEL_H_

#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "msg/base/errno_status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "msg/frame.h"

namespace msgr::rdma {

class SideChannel {
 public:
  // Takes ownership of a connected socket.
  explicit SideChannel(int fd);
  ~SideChannel();
  SideChannel(const SideChannel&) = delete;
  SideChannel& operator=(const SideChannel&) = delete;

  // Connects to "host:port" within `timeout`.
  static absl::StatusOr<std::unique_ptr<SideChannel>> Connect(const std::string& addr,
                                                              absl::Duration timeout);
  // Starts connecting to "host:port" without waiting: the socket becomes writable when the
  // connect is over; then FinishConnect() says how it ended. `*connected`: it already is
  // (FinishConnect not needed).
  static absl::StatusOr<std::unique_ptr<SideChannel>> StartConnect(const std::string& addr,
                                                                   bool* connected);
  // The outcome of StartConnect's connect, once the socket polled writable (or failed).
  absl::Status FinishConnect();

  // Thread-safe against other writers (frames are never interleaved).
  absl::Status WriteFrame(const FrameHeader& h, std::string_view payload, absl::Time deadline);
  // A frame already encoded (EncodeFrame), e.g. one of msg/session's handshake steps.
  absl::Status WriteEncoded(std::string_view frame, absl::Time deadline);
  // A setup refusal: CLOSE carrying `why`'s code (in msg_type) and message.
  absl::Status WriteClose(const absl::Status& why, absl::Time deadline);
  // Reads one verified frame (payload at most `max_payload` bytes).
  absl::Status ReadFrame(uint32_t max_payload, absl::Time deadline, DecodedFrame* out);
  // Non-blocking check after the fd polled readable: kUnavailable on EOF/error, else reads
  // whatever is there and returns frames one by one (kNeedMore when none is complete).
  FrameDecoder::Result ReadAvailable(DecodedFrame* out, absl::Status* error);
  // ReadAvailable's frames, each handed to `on_frame` in order, until none is complete
  // (OK), `on_frame` returns false (OK; the channel is not touched after that, so
  // `on_frame` may give it away or destroy it), or reading fails (that error, after the
  // frames that came before it).
  absl::Status DrainFrames(absl::FunctionRef<bool(const DecodedFrame&)> on_frame);

  // Shuts the socket down (the peer sees EOF); the fd stays valid until destruction.
  void Shutdown();
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }

 private:
  absl::Status WriteAll(const void* data, size_t len, absl::Time deadline);
  absl::Status ReadSome(absl::Time deadline);

  int fd_;
  std::string peer_;
  absl::Mutex write_mu_;
  FrameDecoder decoder_{kMaxControlPayload};
};

// A listening TCP socket. Accept() waits until a connection arrives or Stop() is called.
class Listener {
 public:
  static absl::StatusOr<std::unique_ptr<Listener>> Listen(const std::string& addr);
  ~Listener();
  // The bound "host:port".
  const std::string& addr() const { return addr_; }
  // Returns the next connection, or kCancelled after Stop().
  absl::StatusOr<std::unique_ptr<SideChannel>> Accept();
  void Stop();

 private:
  Listener(int fd, int wake_fd, std::string addr) : fd_(fd), wake_fd_(wake_fd), addr_(addr) {}
  int fd_;
  int wake_fd_;
  std::string addr_;
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_SIDE_CHANNEL_H_
