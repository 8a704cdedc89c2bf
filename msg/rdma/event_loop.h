// EventLoop: the messenger's completion thread. It polls the CQ of every live transport,
// spinning for a short while (up to `spin`) after the last completion worth it (the client
// says which: while its application polls for acknowledgements itself, a spinning
// completion thread would only take the core its application needs) -- adaptive if asked
// (the rdma messenger asks on OSDs): it spins only while most such idle periods end within
// the spin (msg/base/spin_policy.h; with one op in flight per client among many, the next
// completion is hundreds of microseconds away and each spin only took a core from the
// threads that produce it) -- then arms every CQ's
// completion channel, polls once more (to close the race) and sleeps in epoll on the
// channels, the side-channel sockets (EOF = the peer is gone, or a CLOSE frame) and a wake
// eventfd (and the device's asynchronous-event fd). Busy polling would hold a core for
// good whether or not traffic comes, hence the short, bounded spin.
// While a client awaits one-sided writes (acknowledgements arrive as an RDMA WRITE of the
// ring credit, which raises no completion here) the loop naps briefly; a wait that lasts
// longer than a few naps asks the peer for a completion with the next write
// (LoopClient::ArmWakeup) and sleeps: a napping thread per client messenger is what a
// host with many clients cannot afford.
//
// Shared or private (EventLoop::CreateShared / Create): every client messenger of a process
// shares one such thread by default ("rdma_shared_loop"), one looks at all their
// connections per round.
//
// Thread-safety: Add/Remove/Stop from any thread; handlers run on the loop thread.
#ifndef MSGR_MSG_RDMA_EVENT_LOOP_H_
#define MSGR_MSG_RDMA_EVENT_LOOP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "msg/rdma/verbs/device.h"

namespace msgr::rdma {

// What the loop drives for one connection incarnation.
class LoopClient {
 public:
  virtual ~LoopClient() = default;
  // Null for a client with a side channel only (a handshake in progress).
  virtual verbs::CompletionQueue* loop_cq() = 0;
  virtual int loop_side_fd() = 0;
  // Completions polled from loop_cq(). Returns true if they are worth spinning for (a
  // receive; a send whose acknowledgement the loop will have to collect), false for
  // bookkeeping only.
  virtual bool OnCompletions(const verbs::Completion* wc, int n) = 0;
  // The CQ failed (overrun).
  virtual void OnCqError() = 0;
  // loop_side_fd() is readable (data, EOF or error).
  virtual void OnSideReadable() = 0;
  // Called on every polling round: memory the peer writes one-sidedly (ring credit, which
  // acknowledges records). Returns true if it found work.
  virtual bool OnPoll() { return false; }
  // True while the client waits for such one-sided writes: the loop then naps kAwaitNap
  // between rounds once its spin is over, and after kAwaitNaps naps asks ArmWakeup().
  virtual bool awaiting() const { return false; }
  // Asks the peer to raise a completion on loop_cq() with the next one-sided write it
  // makes (the rdma ring credit, WITH_IMM); true if it will, so that the loop may sleep on
  // the CQ's channel rather than nap. Idempotent until that completion arrives.
  virtual bool ArmWakeup() { return false; }
  // True if the loop should also report loop_side_fd() writable (OnSideReadable), read
  // when the client is added: a socket whose connect is in progress. Once it connected,
  // the client calls EventLoop::SideConnected().
  virtual bool side_connecting() const { return false; }
};

class LoopThread;

// One user's share of a completion thread (a messenger's): what it added, its tick, its
// watched fd and its timers. A private loop (Create) has a thread of its own; a shared one
// (CreateShared) drives every shared user in the process that asked for the same spin
// settings with one thread, so that N client messengers in one process (a bench with
// --clients N, an application with several clients) cost one napping, spinning thread, not
// N. Stop() ends this user's share: its clients are released, its tick, watched fd and
// timers dropped, and when it returns no handler of this user runs any more (unless Stop
// runs on the loop thread itself, inside a handler).
class EventLoop {
 public:
  // `spin`: the longest spin after work; `adaptive`: spin only while it pays (else always
  // `spin`).
  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(absl::Duration spin,
                                                           bool adaptive = true);
  // A share of the process's loop for these settings (started by the first user, kept
  // until the process exits; a forked child gets its own).
  static absl::StatusOr<std::unique_ptr<EventLoop>> CreateShared(absl::Duration spin,
                                                                 bool adaptive = true);
  ~EventLoop();  // Stop()

  // Starts driving `c` (kept alive until Remove() or Stop()).
  absl::Status Add(std::shared_ptr<LoopClient> c);
  // Stops driving `c`. A handler already running may finish (it holds a reference), so
  // clients must ignore events for an incarnation they have retired. Never blocks.
  void Remove(const LoopClient* c);
  // Ends this share (above); a private loop's thread is joined. Idempotent.
  void Stop();
  // Runs `tick` on the loop thread about every `every` (checked whenever the loop wakes,
  // which is at least every 100 ms). Housekeeping only: it must not block. One per share;
  // a later call replaces it.
  void SetTick(std::function<void()> tick, absl::Duration every);
  // Runs `fn` once on the loop thread at `when` or soon after (timers are not cancelled:
  // `fn` checks whether it is still wanted, e.g. through a weak_ptr). Timers still due at
  // Stop() are dropped. Any thread; `fn` must not block.
  void RunAt(absl::Time when, std::function<void()> fn);
  // `c`'s side fd connected: the loop stops reporting it writable (side_connecting()).
  void SideConnected(const LoopClient* c);
  // Runs `on_readable` on the loop thread whenever `fd` is readable (the device's
  // asynchronous-event fd). Level-triggered: the handler must drain what made it readable.
  // One such fd per share; call before traffic starts.
  absl::Status WatchFd(int fd, std::function<void()> on_readable);
  // Stops watching it (e.g. the device failed and the fd will stay readable).
  void UnwatchFd();
  bool on_loop_thread() const;
  // Idle periods (an empty round after work, until the next work) and, of those, the ones
  // it slept without spinning because spinning did not pay (the adaptive spin). Of the
  // thread: a shared loop counts for all its users.
  uint64_t idle_periods() const;
  uint64_t sleeps_at_once() const;

 private:
  EventLoop(std::shared_ptr<LoopThread> thread, bool is_private);
  const std::shared_ptr<LoopThread> thread_;
  const uint64_t owner_;
  const bool private_;
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_EVENT_LOOP_H_
