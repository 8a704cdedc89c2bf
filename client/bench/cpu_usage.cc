#include "client/bench/cpu_usage.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace msgr::bench {
namespace {

// The whole of a /proc file; nullopt if it cannot be opened (a process or thread gone).
std::optional<std::string> ReadProcFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

absl::StatusOr<double> ParseProcStatCpu(const std::string& stat, long ticks_per_second) {
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return absl::InvalidArgumentError("no ')' in stat");
  // After ") ": field 3 (state) is index 0, so utime (14) is index 11, stime (15) 12.
  std::vector<std::string> f =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  uint64_t utime, stime;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return absl::InvalidArgumentError("short or malformed stat line");
  }
  return static_cast<double>(utime + stime) / static_cast<double>(ticks_per_second);
}

absl::StatusOr<ThreadCpu> ParseTaskStat(const std::string& stat, long ticks_per_second) {
  const size_t open = stat.find(" (");
  const size_t close = stat.rfind(')');
  ThreadCpu t;
  if (open == std::string::npos || close == std::string::npos || close < open ||
      !absl::SimpleAtoi(stat.substr(0, open), &t.tid)) {
    return absl::InvalidArgumentError("no 'TID (comm)' at the start of the stat line");
  }
  t.comm = stat.substr(open + 2, close - open - 2);
  auto cpu = ParseProcStatCpu(stat, ticks_per_second);
  if (!cpu.ok()) return cpu.status();
  t.cpu_s = *cpu;
  return t;
}

absl::StatusOr<std::vector<ThreadCpu>> ProcessThreadCpu(int pid) {
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(task_dir.c_str());
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("no process ", pid));
  const long ticks = sysconf(_SC_CLK_TCK);
  std::vector<ThreadCpu> threads;
  while (dirent* e = readdir(d)) {
    int tid;
    if (!absl::SimpleAtoi(e->d_name, &tid)) continue;  // "." and ".."
    // A thread gone meanwhile is left out.
    const auto stat = ReadProcFile(absl::StrCat(task_dir, "/", tid, "/stat"));
    auto t = ParseTaskStat(stat.value_or(""), ticks);
    if (t.ok()) threads.push_back(std::move(*t));
  }
  closedir(d);
  return threads;
}

std::vector<ThreadCpu> ThreadCpuDelta(const std::vector<ThreadCpu>& before,
                                      const std::vector<ThreadCpu>& after) {
  std::map<int, const ThreadCpu*> by_tid;
  for (const ThreadCpu& t : before) by_tid[t.tid] = &t;
  std::vector<ThreadCpu> delta;
  delta.reserve(after.size());
  for (const ThreadCpu& t : after) {
    ThreadCpu d = t;
    auto it = by_tid.find(t.tid);
    if (it != by_tid.end() && it->second->cpu_s <= t.cpu_s) {
      d.cpu_s = t.cpu_s - it->second->cpu_s;
    }
    delta.push_back(std::move(d));
  }
  return delta;
}

absl::StatusOr<double> ProcessCpuSeconds(int pid) {
  const auto stat = ReadProcFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return absl::NotFoundError(absl::StrCat("no process ", pid));
  return ParseProcStatCpu(*stat, sysconf(_SC_CLK_TCK));
}

absl::StatusOr<HostCpu> ParseHostCpu(const std::string& proc_stat, long ticks_per_second) {
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n')) {
    if (!absl::ConsumePrefix(&line, "cpu ")) continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice: inside user/nice]
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t v[8];
    if (f.size() < 8) return absl::InvalidArgumentError("short 'cpu' line in /proc/stat");
    for (int i = 0; i < 8; ++i) {
      if (!absl::SimpleAtoi(f[i], &v[i])) {
        return absl::InvalidArgumentError("malformed 'cpu' line in /proc/stat");
      }
    }
    const double tick = 1.0 / static_cast<double>(ticks_per_second);
    HostCpu h;
    h.busy_s = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6]) * tick;
    h.idle_s = static_cast<double>(v[3] + v[4]) * tick;
    h.steal_s = static_cast<double>(v[7]) * tick;
    return h;
  }
  return absl::InvalidArgumentError("no 'cpu' line in /proc/stat");
}

absl::StatusOr<HostCpu> ReadHostCpu() {
  const auto stat = ReadProcFile("/proc/stat");
  if (!stat) return absl::NotFoundError("cannot read /proc/stat");
  return ParseHostCpu(*stat, sysconf(_SC_CLK_TCK));
}

std::optional<HostCpuShare> HostCpuBetween(const HostCpu& before, const HostCpu& after) {
  const double busy = after.busy_s - before.busy_s;
  const double idle = after.idle_s - before.idle_s;
  const double steal = after.steal_s - before.steal_s;
  const double all = busy + idle + steal;
  if (busy < 0 || idle < 0 || steal < 0 || all <= 0) return std::nullopt;
  return HostCpuShare{100 * busy / all, 100 * steal / all};
}

std::vector<int> ReadOsdPids(const std::string& cluster_dir) {
  std::vector<int> pids;
  DIR* d = opendir(cluster_dir.c_str());
  if (d == nullptr) return pids;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (!absl::StartsWith(name, "osd.") || !absl::EndsWith(name, ".pid")) continue;
    std::ifstream in(cluster_dir + "/" + name);
    std::string line;
    int pid;
    if (std::getline(in, line) &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &pid) && pid > 0) {
      pids.push_back(pid);
    }
  }
  closedir(d);
  std::sort(pids.begin(), pids.end());
  return pids;
}

}  // namespace msgr::bench
