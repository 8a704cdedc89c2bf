// For tests that run a monitor and OSDs in one process: wait until the cluster's PGs are
// active before writing (a client op on a peering PG is refused and retried, which counts
// it twice in the OSDs' figures).
#ifndef MSGR_TESTS_OSD_SIM_WAIT_ACTIVE_H_
#define MSGR_TESTS_OSD_SIM_WAIT_ACTIVE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/osd.h"

namespace msgr::osd::testing {

// Waits (bounded, ~10 s) until every running OSD (non-null in `osds`) was handed the
// monitor's latest map (`seen_epoch[i]`, kept by the test from OsdOptions::map_hook) and
// they lead `pgs` active PGs between them with none peering, for five looks in a row.
// Without the map check a cluster still booting passes too early: with one OSD short,
// the others may already lead every PG, and the last one's boot re-peers some of them.
inline absl::Status WaitPgsActive(const std::string& mon_addr,
                                  const std::vector<std::unique_ptr<Osd>>& osds,
                                  const std::atomic<uint64_t>* seen_epoch, uint64_t pgs) {
  auto mc = mon::MonClient::Create(mon_addr, absl::Seconds(5));
  if (!mc.ok()) return mc.status();
  uint64_t active = 0, peering = 0;
  int settled = 0;
  for (int i = 0; i < 500; ++i) {
    auto map = (*mc)->GetMap();
    if (!map.ok()) return map.status();
    bool current = true;
    active = peering = 0;
    for (size_t id = 0; id < osds.size(); ++id) {
      if (osds[id] == nullptr) continue;
      current = current && seen_epoch[id].load() >= map->epoch();
      const nlohmann::json d = nlohmann::json::parse(osds[id]->PerfDumpJson());
      active += d["peering"]["pgs_active"].get<uint64_t>();
      peering += d["peering"]["pgs_peering"].get<uint64_t>();
    }
    settled = current && active == pgs && peering == 0 ? settled + 1 : 0;
    if (settled >= 5) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(active, " PGs active, ", peering, " peering; expected ", pgs,
                   " active, every OSD on the monitor's latest map"));
}

}  // namespace msgr::osd::testing

#endif  // MSGR_TESTS_OSD_SIM_WAIT_ACTIVE_H_
