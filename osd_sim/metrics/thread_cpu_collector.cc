#include "osd_sim/metrics/thread_cpu_collector.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace msgr::metrics {
namespace {

constexpr char kTaskDir[] = "/proc/self/task";
// Fields after "(comm)": state is field 3, utime 14, stime 15.
constexpr size_t kUtimeAfterComm = 14 - 3;
constexpr size_t kStimeAfterComm = 15 - 3;

std::vector<TaskCpu> ReadSelfTasks() {
  std::vector<TaskCpu> tasks;
  DIR* dir = opendir(kTaskDir);
  if (dir == nullptr) return tasks;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(absl::StrCat(kTaskDir, "/", e->d_name, "/stat"));
    std::stringstream ss;
    ss << in.rdbuf();
    auto t = ParseTaskStatLine(ss.str());
    if (t.ok()) tasks.push_back(std::move(*t));  // a thread that just exited is left out
  }
  closedir(dir);
  return tasks;
}

}  // namespace

int ThreadRoleOf(absl::string_view comm) {
  if (absl::StartsWith(comm, "ms-") || comm == "soft-hca") return 0;
  if (absl::StartsWith(comm, "osd-poller")) return 1;
  if (absl::StartsWith(comm, "store-")) return 2;
  return 3;
}

absl::StatusOr<TaskCpu> ParseTaskStatLine(absl::string_view stat) {
  const size_t open = stat.find(" (");
  const size_t close = stat.rfind(')');
  TaskCpu t;
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open ||
      !absl::SimpleAtoi(stat.substr(0, open), &t.tid)) {
    return absl::InvalidArgumentError(absl::StrCat("not a task stat line: ", stat));
  }
  t.comm = std::string(stat.substr(open + 2, close - open - 2));
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipWhitespace());
  uint64_t utime = 0, stime = 0;
  if (fields.size() <= kStimeAfterComm || !absl::SimpleAtoi(fields[kUtimeAfterComm], &utime) ||
      !absl::SimpleAtoi(fields[kStimeAfterComm], &stime)) {
    return absl::InvalidArgumentError(absl::StrCat("no utime/stime in: ", stat));
  }
  t.ticks = utime + stime;
  return t;
}

std::array<double, kThreadRoles> ThreadCpuCollector::Update(const std::vector<TaskCpu>& tasks,
                                                            long ticks_per_second) const {
  absl::MutexLock l(&mu_);
  std::map<int, uint64_t> seen;
  for (const TaskCpu& t : tasks) {
    auto it = last_ticks_.find(t.tid);
    // A new thread, or a reused tid (its time went backwards): all of its time is new.
    const uint64_t before = it != last_ticks_.end() && it->second <= t.ticks ? it->second : 0;
    role_ticks_[ThreadRoleOf(t.comm)] += t.ticks - before;
    seen[t.tid] = t.ticks;
  }
  last_ticks_ = std::move(seen);
  std::array<double, kThreadRoles> seconds{};
  for (int r = 0; r < kThreadRoles; ++r) {
    seconds[r] = static_cast<double>(role_ticks_[r]) / static_cast<double>(ticks_per_second);
  }
  return seconds;
}

std::array<double, kThreadRoles> ThreadCpuCollector::Split(std::array<double, kThreadRoles> seconds,
                                                           double transport_in_pollers_s) const {
  constexpr int kTransport = 0, kPoller = 1;
  static_assert(kThreadRoleNames[kTransport][0] == 't' && kThreadRoleNames[kPoller][0] == 'p');
  // The moved time is sampled (the pollers' messenger_ns): a scrape may see it grow faster
  // than the threads' CPU. The poller's share never goes down (a counter), and
  // the two shares add up to the threads' CPU; transport only grows too, as both inputs do.
  const double moved = std::clamp(transport_in_pollers_s, 0.0, seconds[kPoller]);
  absl::MutexLock l(&mu_);
  const double poller = std::max(seconds[kPoller] - moved, last_poller_s_);
  seconds[kTransport] += seconds[kPoller] - poller;
  seconds[kPoller] = poller;
  last_poller_s_ = poller;
  return seconds;
}

std::vector<prometheus::MetricFamily> ThreadCpuCollector::Collect() const {
  const long hz = sysconf(_SC_CLK_TCK);
  // One scrape at a time (the exposer has two threads): a later scrape's poller share must
  // not be split from an earlier scrape's totals.
  absl::MutexLock scrape(&scrape_mu_);
  const std::array<double, kThreadRoles> seconds =
      Split(Update(ReadSelfTasks(), hz > 0 ? hz : 100),
            transport_in_pollers_s_ ? transport_in_pollers_s_() : 0.0);
  prometheus::MetricFamily f;
  f.name = absl::StrCat(kMetricPrefix, "thread_cpu_seconds_total");
  f.help = "CPU time of this process's threads by role (from their names), user + system";
  f.type = prometheus::MetricType::Counter;
  for (int r = 0; r < kThreadRoles; ++r) {
    prometheus::ClientMetric m;
    m.label = labels_;
    m.label.push_back({"role", kThreadRoleNames[r]});
    m.counter.value = seconds[r];
    f.metric.push_back(std::move(m));
  }
  return {f};
}

}  // namespace msgr::metrics
