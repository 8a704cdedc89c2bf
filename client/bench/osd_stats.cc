#include "client/bench/osd_stats.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "osd_sim/admin_socket.h"

namespace msgr::bench {
namespace {

using nlohmann::json;

// obj[key] as a counter, or an error naming `where`.
absl::StatusOr<uint64_t> Counter(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_unsigned()) {
    return absl::InvalidArgumentError(absl::StrCat("perf dump has no ", where, key));
  }
  return obj[key].get<uint64_t>();
}

}  // namespace

absl::StatusOr<OsdPerfSample> ParsePerfDump(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("perf dump is not a JSON object");
  }
  OsdPerfSample s;
  if (!j.contains("osd") || !j["osd"].is_object() || !j["osd"].contains("id") ||
      !j["osd"]["id"].is_number_integer() || !j["osd"].contains("uptime_s") ||
      !j["osd"]["uptime_s"].is_number()) {
    return absl::InvalidArgumentError("perf dump has no osd.id and osd.uptime_s");
  }
  s.id = j["osd"]["id"].get<int>();
  s.uptime_s = j["osd"]["uptime_s"].get<double>();

  if (!j.contains("pollers") || !j["pollers"].is_array() || j["pollers"].empty()) {
    return absl::InvalidArgumentError("perf dump has no pollers[]");
  }
  for (const json& p : j["pollers"]) {
    auto spin = Counter(p, "spin_ns", "pollers[].");
    auto busy = Counter(p, "busy_ns", "pollers[].");
    auto crc = Counter(p, "crc_ns", "pollers[].");
    if (!spin.ok()) return spin.status();
    if (!busy.ok()) return busy.status();
    if (!crc.ok()) return crc.status();
    s.spin_ns += *spin;
    s.busy_ns += *busy;
    s.crc_ns += *crc;
    // Optional: an OSD from before the counter has none (its sockets have threads).
    if (p.contains("messenger_ns")) {
      auto messenger = Counter(p, "messenger_ns", "pollers[].");
      if (!messenger.ok()) return messenger.status();
      s.messenger_ns += *messenger;
    }
  }

  // One group per messenger the OSD runs ("tcp", "rdma"), each with the common counters.
  int messengers = 0;
  if (j.contains("messenger") && j["messenger"].is_object()) {
    for (const auto& [type, m] : j["messenger"].items()) {
      auto rx = Counter(m, "payload_bytes_copied_rx", absl::StrCat("messenger.", type, "."));
      if (!rx.ok()) return rx.status();
      s.wire_copied_rx += *rx;
      auto tx = Counter(m, "payload_bytes_copied_tx", absl::StrCat("messenger.", type, "."));
      if (!tx.ok()) return tx.status();
      s.send_copied_tx += *tx;
      ++messengers;
      if (type == "rdma" && m.contains("rdma") && m["rdma"].is_object()) {
        const json& r = m["rdma"];
        if (r.contains("registered_bytes") && r["registered_bytes"].is_number_unsigned()) {
          s.rdma_registered_bytes = r["registered_bytes"].get<uint64_t>();
        }
        if (m.contains("connections_open") && m["connections_open"].is_number_unsigned()) {
          s.rdma_sessions = m["connections_open"].get<uint64_t>();
        }
      }
    }
  }
  if (messengers == 0) return absl::InvalidArgumentError("perf dump has no messenger.<type>");

  const json& store_group = j.contains("store") ? j["store"] : json::object();
  auto store = Counter(store_group, "payload_bytes_copied", "store.");
  if (!store.ok()) return store.status();
  s.store_copied = *store;
  return s;
}

std::vector<std::string> OsdAdminSockets(const std::string& cluster_dir) {
  std::vector<std::string> paths;
  const std::string run = cluster_dir + "/run";
  DIR* d = opendir(run.c_str());
  if (d == nullptr) return paths;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (absl::StartsWith(name, "osd.") && absl::EndsWith(name, ".asok")) {
      paths.push_back(run + "/" + name);
    }
  }
  closedir(d);
  std::sort(paths.begin(), paths.end());
  return paths;
}

PerfSamples SamplePerf(const std::vector<std::string>& sockets) {
  PerfSamples samples;
  for (const std::string& path : sockets) {
    auto reply = osd::AdminSocket::Query(path, "perf dump");
    if (!reply.ok()) {
      samples.emplace(path, reply.status());
      continue;
    }
    const double now_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
    auto s = ParsePerfDump(*reply);
    if (s.ok()) s->started_at_s = now_s - s->uptime_s;
    samples.emplace(path, s.ok() ? s
                                 : absl::Status(s.status().code(),
                                                absl::StrCat(path, ": ", s.status().message())));
  }
  return samples;
}

absl::StatusOr<OsdPerfDelta> SumPerfDeltas(const PerfSamples& before, const PerfSamples& after) {
  if (before.empty()) return absl::NotFoundError("no OSD admin sockets");
  OsdPerfDelta d;
  for (const auto& [path, b] : before) {
    if (!b.ok()) return b.status();
    auto it = after.find(path);
    if (it == after.end())
      return absl::NotFoundError(absl::StrCat(path, " not read after the run"));
    if (!it->second.ok()) return it->second.status();
    const OsdPerfSample& a = *it->second;
    const bool moved = a.started_at_s != 0 && b->started_at_s != 0 &&
                       std::abs(a.started_at_s - b->started_at_s) > kRestartSlackSeconds;
    if (a.id != b->id || moved || a.uptime_s < b->uptime_s || a.spin_ns < b->spin_ns || a.busy_ns < b->busy_ns ||
        a.crc_ns < b->crc_ns || a.messenger_ns < b->messenger_ns ||
        a.wire_copied_rx < b->wire_copied_rx ||
        a.send_copied_tx < b->send_copied_tx ||
        a.store_copied < b->store_copied) {
      return absl::FailedPreconditionError(
          absl::StrCat("osd.", b->id, " restarted during the run (", path, ")"));
    }
    ++d.osds;
    d.spin_ns += a.spin_ns - b->spin_ns;
    d.busy_ns += a.busy_ns - b->busy_ns;
    d.crc_ns += a.crc_ns - b->crc_ns;
    d.messenger_ns += a.messenger_ns - b->messenger_ns;
    d.wire_copied_rx += a.wire_copied_rx - b->wire_copied_rx;
    d.send_copied_tx += a.send_copied_tx - b->send_copied_tx;
    d.store_copied += a.store_copied - b->store_copied;
  }
  return d;
}

}  // namespace msgr::bench
