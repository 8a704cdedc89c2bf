#include "msg/session/fence.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace msgr::session {

void FenceSet::Set(std::vector<FencedPeer> fenced) {
  absl::MutexLock l(&mu_);
  fenced_ = std::move(fenced);
}

absl::Status FenceSet::Check(const EntityName& peer, uint64_t instance) const {
  absl::MutexLock l(&mu_);
  for (const FencedPeer& f : fenced_) {
    if (!(f.name == peer) || (f.instance != 0 && f.instance != instance)) continue;
    return absl::PermissionDeniedError(
        absl::StrCat(peer.ToString(), " (instance ", absl::Hex(instance), ") is fenced: ",
                     f.why.empty() ? "blocklisted by the cluster" : f.why));
  }
  return absl::OkStatus();
}

bool FenceSet::empty() const {
  absl::MutexLock l(&mu_);
  return fenced_.empty();
}

}  // namespace msgr::session
