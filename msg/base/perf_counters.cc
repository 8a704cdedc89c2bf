#include "msg/base/perf_counters.h"

#include <utility>

#include "absl/strings/str_split.h"

namespace msgr {

void AddToJson(const CounterGroup& group, nlohmann::json* out) {
  for (const CounterValue& v : group.values) (*out)[v.desc->name] = v.value;
}

void CounterRegistry::Add(CounterSource source) {
  absl::MutexLock l(&mu_);
  sources_.push_back(std::move(source));
}

void CounterRegistry::ForEach(
    const std::function<void(const CounterSource&, const std::vector<CounterGroup>&)>& fn) const {
  std::vector<CounterSource> sources;
  {
    absl::MutexLock l(&mu_);
    sources = sources_;
  }
  // Collected outside the lock: a collect function may take its component's own locks.
  for (const CounterSource& s : sources) fn(s, s.collect());
}

nlohmann::json CounterRegistry::ToJson() const {
  nlohmann::json root = nlohmann::json::object();
  ForEach([&](const CounterSource& s, const std::vector<CounterGroup>& groups) {
    nlohmann::json* at = &root;
    for (absl::string_view part : absl::StrSplit(s.path, '.')) at = &(*at)[std::string(part)];
    if (s.index >= 0) {
      if (!at->is_array()) *at = nlohmann::json::array();
      while (at->size() <= static_cast<size_t>(s.index)) at->push_back(nlohmann::json::object());
      at = &(*at)[s.index];
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      AddToJson(groups[i], i == 0 ? at : &(*at)[groups[i].name]);
    }
  });
  return root;
}

}  // namespace msgr
