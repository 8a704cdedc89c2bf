// Fencing (Ceph's blocklist): the peers a messenger no longer serves, written once for
// every backend. A FenceSet answers "is this authenticated peer fenced?" for the accept
// path (a fenced peer's handshake is refused) and for the sweep that closes the sessions
// of a peer fenced while connected (Messenger::SetFenced).
//
// Thread-safety: all methods may be called from any thread.
#ifndef MSGR_MSG_SESSION_FENCE_H_
#define MSGR_MSG_SESSION_FENCE_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "msg/messenger.h"

namespace msgr::session {

// The rule itself is the contract's (msgr::CheckFenced, msg/messenger.h); a FenceSet is
// a messenger's current list, checked with it.
class FenceSet {
 public:
  // Replaces the set.
  void Set(std::vector<FencedPeer> fenced);
  // OK, or PERMISSION_DENIED "NAME (instance X) is fenced: WHY" when an entry matches:
  // its name, and its instance unless that is 0 (every instance).
  absl::Status Check(const EntityName& peer, uint64_t instance) const;
  bool empty() const;

  // Messenger::SetFenced, for any backend: replaces the set, then closes each of the
  // accepted sessions `accepted` (pointers to anything with peer_name() and
  // peer_instance()) whose peer is fenced now, with `close(session, why)`, and logs it.
  // Returns how many it closed.
  template <typename SessionPtr, typename Close>
  size_t SetAndSweep(std::vector<FencedPeer> fenced, const std::vector<SessionPtr>& accepted,
                     const char* backend, Close close) {
    Set(std::move(fenced));
    size_t closed = 0;
    for (const SessionPtr& s : accepted) {
      absl::Status why = Check(s->peer_name(), s->peer_instance());
      if (why.ok()) continue;
      LogClosing(backend, s->peer_name(), why);
      close(s, why);
      ++closed;
    }
    return closed;
  }

 private:
  static void LogClosing(const char* backend, const EntityName& peer, const absl::Status& why);
  mutable absl::Mutex mu_;
  std::vector<FencedPeer> fenced_ ABSL_GUARDED_BY(mu_);
};

}  // namespace msgr::session

#endif  // MSGR_MSG_SESSION_FENCE_H_
