#include "msg/session/fence.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace msgr::session {

void FenceSet::Set(std::vector<FencedPeer> fenced) {
  absl::MutexLock l(&mu_);
  fenced_ = std::move(fenced);
}

absl::Status CheckFenced(const std::vector<FencedPeer>& fenced, const EntityName& peer,
                         uint64_t instance) {
  for (const FencedPeer& f : fenced) {
    if (!(f.name == peer) || (f.instance != 0 && f.instance != instance)) continue;
    return absl::PermissionDeniedError(
        absl::StrCat(peer.ToString(), " (instance ", absl::Hex(instance), ") is fenced: ",
                     f.why.empty() ? "blocklisted by the cluster" : f.why));
  }
  return absl::OkStatus();
}

absl::Status FenceSet::Check(const EntityName& peer, uint64_t instance) const {
  absl::MutexLock l(&mu_);
  return CheckFenced(fenced_, peer, instance);
}

void FenceSet::LogClosing(const char* backend, const EntityName& peer, const absl::Status& why) {
  spdlog::warn("msgr {}: closing the session of {}: {}", backend, peer.ToString(),
               std::string(why.message()));
}

bool FenceSet::empty() const {
  absl::MutexLock l(&mu_);
  return fenced_.empty();
}

}  // namespace msgr::session
