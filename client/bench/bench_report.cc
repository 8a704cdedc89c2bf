#include "client/bench/bench_report.h"

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

nlohmann::json ToJson(const BenchReport& r) {
  const LatencyHistogram& h = r.run.latency;
  nlohmann::json cdf = nlohmann::json::array();
  for (const auto& [ns, q] : h.Cdf()) cdf.push_back({Us(ns), q});
  nlohmann::json j;
  j["mode"] = r.mode;
  j["ms_type"] = r.ms_type;
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
  j["verify"] = {{"enabled", r.verify_enabled},
                 {"checked", r.verify.checked},
                 {"mismatches", r.verify.mismatches}};
  j["auth"] = r.auth;
  j["errors"] = r.run.errors;
  j["lat_cdf"] = std::move(cdf);
  return j;
}

std::string SummaryText(const BenchReport& r) {
  std::string s;
  auto line = [&s](const std::string& k, const std::string& v) {
    absl::StrAppend(&s, absl::StrFormat("%-24s %s\n", k + ":", v));
  };
  if (r.mode == "write") {
    const LatencyHistogram& h = r.run.latency;
    line("Total time run (s)", absl::StrFormat("%.3f", r.run.seconds));
    line("ms_type", r.ms_type);
    line("Auth", r.auth);
    line("Object size", absl::StrCat(r.object_size));
    line("Concurrency", absl::StrCat(r.concurrency));
    line("Total writes made", absl::StrCat(r.run.ops));
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
    for (const auto& e : r.run.error_samples) absl::StrAppend(&s, "  error: ", e, "\n");
  } else {
    line("ms_type", r.ms_type);
    line("Auth", r.auth);
  }
  if (r.verify_enabled) {
    absl::StrAppend(&s, "verify: checked ", r.verify.checked, ", mismatches ",
                    r.verify.mismatches, "\n");
    for (const auto& e : r.verify.samples) absl::StrAppend(&s, "  mismatch: ", e, "\n");
  } else {
    absl::StrAppend(&s, "verify: checked 0, mismatches 0 (not requested: --verify)\n");
  }
  return s;
}

}  // namespace msgr::bench
