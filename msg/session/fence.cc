#include "msg/session/fence.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace msgr::session {

void FenceSet::Set(std::vector<FencedPeer> fenced) {
  absl::MutexLock l(&mu_);
  fenced_ = std::move(fenced);
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
