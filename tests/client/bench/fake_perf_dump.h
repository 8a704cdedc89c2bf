// An OSD perf dump of the real shape (osd_sim/osd.cc PerfDumpJson: messenger.<type>,
// osd, pollers[], store) with chosen values of the counters the bench reads, for tests
// of osd_stats and of the bench CLI over an admin socket.
#ifndef MSGR_TESTS_CLIENT_BENCH_FAKE_PERF_DUMP_H_
#define MSGR_TESTS_CLIENT_BENCH_FAKE_PERF_DUMP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace msgr::bench::testing {

struct FakeOsdCounters {
  int id = 0;
  double uptime_s = 1;
  std::vector<uint64_t> spin_ns = {0};  // one per poller
  std::vector<uint64_t> crc_ns = {0};
  std::vector<uint64_t> busy_ns = {0};
  std::vector<uint64_t> messenger_ns;  // one per poller; empty: the dump has no such field
  uint64_t tcp_copied_rx = 0;
  uint64_t rdma_copied_rx = 0;
  uint64_t rdma_copied_tx = 0;
  uint64_t store_copied = 0;
};

inline std::string FakePerfDump(const FakeOsdCounters& c) {
  using nlohmann::json;
  json pollers = json::array();
  for (size_t i = 0; i < c.spin_ns.size(); ++i) {
    pollers.push_back({{"spin_ns", c.spin_ns[i]}, {"spin_ms", c.spin_ns[i] / 1000000},
                       {"crc_ns", c.crc_ns[i]},
                       {"busy_ns", i < c.busy_ns.size() ? c.busy_ns[i] : 0}, {"crc_bytes", 0}, {"records", 7}});
    if (i < c.messenger_ns.size()) pollers.back()["messenger_ns"] = c.messenger_ns[i];
  }
  json j;
  j["messenger"]["tcp"] = {{"payload_bytes_copied_rx", c.tcp_copied_rx},
                           {"payload_bytes_copied_tx", 0}, {"records_received", 3}};
  j["messenger"]["rdma"] = {{"payload_bytes_copied_rx", c.rdma_copied_rx},
                            {"payload_bytes_copied_tx", c.rdma_copied_tx},
                            {"rdma", {{"zero_copy_records", 0}}}};
  j["osd"] = {{"id", c.id}, {"uptime_s", c.uptime_s}, {"ops", 3}, {"durability", "memory"}};
  j["pollers"] = pollers;
  j["store"] = {{"payload_bytes_copied", c.store_copied}, {"flushes", 0}};
  return j.dump(2);
}

}  // namespace msgr::bench::testing

#endif  // MSGR_TESTS_CLIENT_BENCH_FAKE_PERF_DUMP_H_
