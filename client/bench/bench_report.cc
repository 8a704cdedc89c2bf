#include "client/bench/bench_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace msgr::bench {
namespace {

double Us(uint64_t ns) { return std::round(ns / 100.0) / 10.0; }  // 0.1 us resolution

nlohmann::json OrNull(std::optional<double> v) {
  return v ? nlohmann::json(std::round(*v * 1e4) / 1e4) : nlohmann::json(nullptr);
}

std::string OrDash(std::optional<double> v) {
  return v ? absl::StrFormat("%.3f", *v) : std::string("n/a");
}

}  // namespace

double MiBPerSecond(const BenchReport& r) {
  return r.run.seconds > 0 ? r.run.bytes / r.run.seconds / (1 << 20) : 0;
}

double Iops(const BenchReport& r) { return r.run.seconds > 0 ? r.run.ops / r.run.seconds : 0; }

std::optional<double> CpuSecondsPerGiB(std::optional<double> cpu_s, uint64_t bytes) {
  if (!cpu_s || bytes == 0) return std::nullopt;
  return *cpu_s / (static_cast<double>(bytes) / (1ull << 30));
}

std::optional<PollerTimes> PollerCpuTimes(const BenchReport& r) {
  if (!r.osd_perf) return std::nullopt;
  PollerTimes t;
  t.crc_s = r.osd_perf->crc_ns / 1e9;
  t.transport_s = r.osd_perf->messenger_ns / 1e9;
  t.spin_s = r.osd_perf->spin_ns / 1e9;
  if (r.osd_role_cpu_s) {
    const double poller_s = (*r.osd_role_cpu_s)[static_cast<int>(ThreadRole::kPoller)];
    if (t.crc_s > poller_s) {
      t.crc_s = poller_s;
      t.capped = true;
    }
    if (t.transport_s > poller_s - t.crc_s) {
      t.transport_s = poller_s - t.crc_s;
      t.capped = true;
    }
    // spin_ns keeps counting while a yielding poller lets others run, so with the poller
    // threads' CPU known, their spin is what that CPU did outside the passes with work.
    const double busy_s = r.osd_perf->busy_ns / 1e9;
    const double left = poller_s - t.crc_s - t.transport_s;
    if (busy_s > left) t.capped = true;
    t.spin_s = std::max(0.0, left - std::min(busy_s, left));
  }
  return t;
}

CpuPerOp CpuMicrosPerOp(const BenchReport& r) {
  auto per_op = [&r](std::optional<double> cpu_s) -> std::optional<double> {
    if (!cpu_s || r.run.ops == 0) return std::nullopt;
    return *cpu_s * 1e6 / static_cast<double>(r.run.ops);
  };
  CpuPerOp c;
  c.client = per_op(r.run.client_cpu_s);
  c.osds = per_op(r.osd_cpu_s);
  const std::optional<PollerTimes> poller = PollerCpuTimes(r);
  if (r.osd_cpu_s && poller) c.osds_busy = per_op(std::max(0.0, *r.osd_cpu_s - poller->spin_s));
  return c;
}

OsdCpuByRole OsdCpuPerGiBByRole(const BenchReport& r) {
  OsdCpuByRole c;
  if (!r.osd_role_cpu_s) return c;
  const RoleCpu& cpu = *r.osd_role_cpu_s;
  auto per_gib = [&r](double s) { return CpuSecondsPerGiB(s, r.run.bytes); };
  // transport, crc and poller need the pollers' counters: part of a poller's CPU is the
  // transport's when it drives its tcp messenger.
  c.store = per_gib(cpu[static_cast<int>(ThreadRole::kStore)]);
  c.other = per_gib(cpu[static_cast<int>(ThreadRole::kOther)]);
  if (const std::optional<PollerTimes> poller = PollerCpuTimes(r)) {
    c.crc = per_gib(poller->crc_s);
    c.transport = per_gib(cpu[static_cast<int>(ThreadRole::kTransport)] + poller->transport_s);
    c.poller = per_gib(cpu[static_cast<int>(ThreadRole::kPoller)] - poller->crc_s -
                       poller->transport_s);
    c.poller_spin = per_gib(poller->spin_s);
  }
  return c;
}

CopiesPerByte PayloadCopiesPerByte(const BenchReport& r) {
  auto per_byte = [&r](uint64_t copied) -> std::optional<double> {
    if (r.run.bytes == 0) return std::nullopt;
    return static_cast<double>(copied) / static_cast<double>(r.run.bytes);
  };
  CopiesPerByte c;
  c.client = per_byte(r.client_copied_tx);
  if (r.osd_perf) {
    c.osd_wire = per_byte(r.osd_perf->wire_copied_rx);
    c.osd_store = per_byte(r.osd_perf->store_copied);
    c.osd_send = per_byte(r.osd_perf->send_copied_tx);
  }
  return c;
}

nlohmann::json ToJson(const BenchReport& r) {
  const LatencyHistogram& h = r.run.latency;
  nlohmann::json cdf = nlohmann::json::array();
  for (const auto& [ns, q] : h.Cdf()) cdf.push_back({Us(ns), q});
  nlohmann::json j;
  j["mode"] = r.mode;
  j["ms_type"] = r.ms_type;
  j["pool"] = r.pool;
  j["object_size"] = r.object_size;
  j["concurrency"] = r.concurrency;
  j["seconds"] = std::round(r.run.seconds * 1000) / 1000;
  j["ops"] = r.run.ops;
  j["bytes"] = r.run.bytes;
  j["mb_per_s"] = std::round(MiBPerSecond(r) * 100) / 100;
  j["iops"] = std::round(Iops(r) * 10) / 10;
  j["lat_us"] = {{"p50", Us(h.Percentile(0.5))},   {"p99", Us(h.Percentile(0.99))},
                 {"p999", Us(h.Percentile(0.999))}, {"max", Us(h.max())},
                 {"avg", std::round(h.mean() / 100) / 10}};
  j["cpu_s_per_gb"] = {
      {"client", OrNull(CpuSecondsPerGiB(r.run.client_cpu_s, r.run.bytes))},
      {"osds", OrNull(CpuSecondsPerGiB(r.osd_cpu_s, r.run.bytes))}};
  j["osd_processes"] = r.osd_processes;
  const CpuPerOp per_op = CpuMicrosPerOp(r);
  j["cpu_us_per_op"] = {{"client", OrNull(per_op.client)},
                        {"osds", OrNull(per_op.osds)},
                        {"osds_busy", OrNull(per_op.osds_busy)}};
  const OsdCpuByRole role = OsdCpuPerGiBByRole(r);
  j["osd_cpu_s_per_gb_by_role"] = {{"transport", OrNull(role.transport)},
                                   {"crc", OrNull(role.crc)},
                                   {"poller", OrNull(role.poller)},
                                   {"store", OrNull(role.store)},
                                   {"other", OrNull(role.other)}};
  j["poller_spin_s_per_gb"] = OrNull(role.poller_spin);
  const CopiesPerByte copies = PayloadCopiesPerByte(r);
  j["copies_per_byte"] = {{"client", OrNull(copies.client)},
                          {"osd_wire", OrNull(copies.osd_wire)},
                          {"osd_store", OrNull(copies.osd_store)},
                          {"osd_send", OrNull(copies.osd_send)}};
  j["verify"] = {{"enabled", r.verify_enabled},
                 {"checked", r.verify.checked},
                 {"mismatches", r.verify.mismatches}};
  j["auth"] = r.auth;
  j["ms_mode"] = r.ms_mode;
  j["errors"] = r.run.errors;
  j["clients"] = r.clients;
  j["connect_s"] = OrNull(r.connect_s);
  j["registered_kib_per_session"] = {{"osd", OrNull(r.osd_registered_kib_per_session)},
                                     {"client", OrNull(r.client_registered_kib_per_session)}};
  if (r.host_cpu) {
    j["host_cpu"] = {{"busy_pct", r.host_cpu->busy_pct}, {"steal_pct", r.host_cpu->steal_pct}};
  } else {
    j["host_cpu"] = {{"busy_pct", nullptr}, {"steal_pct", nullptr}};
  }
  j["lat_cdf"] = std::move(cdf);
  return j;
}

std::string SummaryText(const BenchReport& r) {
  std::string s;
  auto line = [&s](const std::string& k, const std::string& v) {
    absl::StrAppend(&s, absl::StrFormat("%-24s %s\n", k + ":", v));
  };
  if (r.mode == "write" || r.mode == "seq" || r.mode == "rand") {
    const LatencyHistogram& h = r.run.latency;
    const bool reads = r.mode != "write";
    line("Total time run (s)", absl::StrFormat("%.3f", r.run.seconds));
    line("ms_type", r.ms_type);
    line("Pool", r.pool);
    line("Auth", r.auth);
    line("ms_mode", r.ms_mode);
    line("Object size", absl::StrCat(r.object_size));
    line("Concurrency", absl::StrCat(r.concurrency));
    if (r.clients > 1) line("Clients", absl::StrCat(r.clients));
    line("Connect time (s)", r.connect_s ? absl::StrFormat("%.3f", *r.connect_s) : "-");
    if (r.osd_registered_kib_per_session || r.client_registered_kib_per_session) {
      auto kib = [](const std::optional<double>& v) {
        return v ? absl::StrFormat("%.0f", *v) : std::string("-");
      };
      line("Registered KiB/session",
           absl::StrCat("OSD ", kib(r.osd_registered_kib_per_session), ", client ",
                        kib(r.client_registered_kib_per_session)));
    }
    if (reads) line("Mode", r.mode);
    line(reads ? "Total reads made" : "Total writes made", absl::StrCat(r.run.ops));
    line("Bandwidth (MB/s)", absl::StrFormat("%.2f", MiBPerSecond(r)));
    line("IOPS", absl::StrFormat("%.1f", Iops(r)));
    line("Latency avg (us)", absl::StrFormat("%.1f", h.mean() / 1e3));
    line("Latency p50 (us)", absl::StrFormat("%.1f", Us(h.Percentile(0.5))));
    line("Latency p99 (us)", absl::StrFormat("%.1f", Us(h.Percentile(0.99))));
    line("Latency p99.9 (us)", absl::StrFormat("%.1f", Us(h.Percentile(0.999))));
    line("Latency max (us)", absl::StrFormat("%.1f", Us(h.max())));
    line("Errors", absl::StrCat(r.run.errors));
    line("CPU-s/GB client", OrDash(CpuSecondsPerGiB(r.run.client_cpu_s, r.run.bytes)));
    line("CPU-s/GB OSDs", absl::StrCat(OrDash(CpuSecondsPerGiB(r.osd_cpu_s, r.run.bytes)), " (",
                                       r.osd_processes, " processes)"));
    const CpuPerOp per_op = CpuMicrosPerOp(r);
    line("CPU-us/op client", OrDash(per_op.client));
    line("CPU-us/op OSDs", OrDash(per_op.osds));
    line("CPU-us/op OSDs busy", absl::StrCat(OrDash(per_op.osds_busy), " (less pollers' spin)"));
    const OsdCpuByRole role = OsdCpuPerGiBByRole(r);
    line("OSD CPU-s/GB by role",
         absl::StrCat("transport ", OrDash(role.transport), ", crc ", OrDash(role.crc),
                      ", poller ", OrDash(role.poller), " (spin ", OrDash(role.poller_spin),
                      "), store ", OrDash(role.store), ", other ", OrDash(role.other)));
    const CopiesPerByte copies = PayloadCopiesPerByte(r);
    line("Copies/byte",
         absl::StrCat("client ", OrDash(copies.client), ", OSD wire ", OrDash(copies.osd_wire),
                      ", OSD store ", OrDash(copies.osd_store), ", OSD send ",
                      OrDash(copies.osd_send)));
    line("Host CPU", r.host_cpu ? absl::StrFormat("busy %.0f%%, stolen by the hypervisor %.0f%%",
                                                  r.host_cpu->busy_pct, r.host_cpu->steal_pct)
                                : std::string("-"));
    for (const auto& e : r.run.error_samples) absl::StrAppend(&s, "  error: ", e, "\n");
  } else {
    line("ms_type", r.ms_type);
    line("Pool", r.pool);
    line("Auth", r.auth);
    line("ms_mode", r.ms_mode);
  }
  if (r.verify_enabled) {
    absl::StrAppend(&s, "verify: ", r.verify.checked - std::min(r.verify.checked, r.verify.mismatches),
                    " ok, ", r.verify.mismatches, " bad (of ", r.verify.checked,
                    " objects read back)\n");
    for (const auto& e : r.verify.samples) absl::StrAppend(&s, "  mismatch: ", e, "\n");
  } else {
    absl::StrAppend(&s, "verify: not requested (--verify reads every written object back)\n");
  }
  return s;
}

}  // namespace msgr::bench
