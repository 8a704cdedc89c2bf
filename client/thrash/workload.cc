// //client/thrash:workload — one client process of the thrasher (tools/thrash.sh).
//
//   workload --cluster-dir DIR --id K --writers N --objects M --seconds S --seed X
//            --history FILE [--ms-type tcp|rdma] [--min-size 4096] [--max-size 8388608]
//            [--rate OPS_PER_S] [--conf FILE]
//   workload --cluster-dir DIR --final-read --writers N --objects M --history FILE
//
// Writer K owns objects thrK_0 .. thrK_{M-1}: it writes them (a new version each time, of
// a size drawn between --min-size and --max-size, so sizes change between versions) and
// deletes them once they exist; it reads any writer's objects. One op at a time, so a
// writer's ops on an object are in version order. Every op is logged to FILE before and
// after the call (client/thrash/history.h); a restarted writer continues above the
// versions its history shows. --final-read reads every object of every writer once.
// Exit status: 0 done, 1 could not reach the cluster before the deadline, 2 bad usage.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cli/cluster_options.h"
#include "client/client.h"
#include "client/thrash/history.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, cluster_dir, "", "the cluster (DIR/mon.addr, DIR/keyring, DIR/msgr.conf)");
ABSL_FLAG(std::string, conf, "", "settings from FILE's [global] and [client] (default: DIR/msgr.conf)");
ABSL_FLAG(std::string, ms_type, "", "tcp|rdma (default: the cluster's)");
ABSL_FLAG(int, id, 0, "this writer's number K: it owns thrK_*");
ABSL_FLAG(int, writers, 1, "how many writers there are (whose objects reads pick from)");
ABSL_FLAG(int, objects, 16, "objects per writer");
ABSL_FLAG(double, seconds, 30, "run this long");
ABSL_FLAG(uint64_t, seed, 1, "random seed (ops, objects, sizes)");
ABSL_FLAG(std::string, history, "", "history file to append to");
ABSL_FLAG(uint64_t, min_size, 4096, "smallest object version, bytes");
ABSL_FLAG(uint64_t, max_size, 8 << 20, "largest object version, bytes");
ABSL_FLAG(int, timeout, 20, "seconds an op may take before it fails");
ABSL_FLAG(bool, final_read, false, "read every object once and stop");
ABSL_FLAG(double, rate, 10, "ops per second at most (0: as fast as they complete)");

namespace msgr::thrash {
namespace {

std::atomic<bool> g_stop{false};

class History {
 public:
  explicit History(const std::string& path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::lseek(fd_, 0, SEEK_END) > 0) {
      // A killed predecessor may have left half a line: start ours on a fresh one.
      char last = '\n';
      int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (rd >= 0) {
        off_t end = ::lseek(rd, 0, SEEK_END);
        if (end > 0 && ::pread(rd, &last, 1, end - 1) == 1 && last != '\n') Append("\n");
        ::close(rd);
      }
    }
  }
  ~History() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  void Log(const nlohmann::json& j) { Append(j.dump() + "\n"); }

 private:
  void Append(const std::string& s) {
    // One write(2) per line: a kill leaves whole lines, or a torn last one.
    if (::write(fd_, s.data(), s.size()) != static_cast<ssize_t>(s.size())) {
      std::cerr << "workload: history write failed: " << std::strerror(errno) << "\n";
    }
  }
  int fd_ = -1;
};

std::string Oid(int writer, int i) { return absl::StrCat("thr", writer, "_", i); }

nlohmann::json Start(int c, const char* op, const std::string& oid, uint64_t v, uint64_t size) {
  return {{"ev", "start"}, {"c", c},     {"op", op},
          {"oid", oid},    {"v", v},     {"size", size},
          {"t", MonotonicNanos()}};
}

nlohmann::json End(int c, const char* op, const std::string& oid, uint64_t v,
                   const absl::Status& s) {
  nlohmann::json j = {{"ev", "end"}, {"c", c},   {"op", op},
                      {"oid", oid},  {"v", v},   {"t", MonotonicNanos()},
                      {"ok", s.ok()}};
  if (!s.ok()) j["err"] = s.ToString();
  return j;
}

// A read: logs what it got (version, 0 for no such object, or why it failed).
void Read(client::Client& c, History& h, int me, const std::string& oid) {
  h.Log(Start(me, "r", oid, 0, 0));
  auto got = c.Read(oid);
  nlohmann::json e = End(me, "r", oid, 0, got.ok() || absl::IsNotFound(got.status())
                                              ? absl::OkStatus()
                                              : got.status());
  if (got.ok()) {
    auto v = CheckContent(oid, *got);
    if (v.ok()) {
      e["got"] = *v;
    } else {
      e["got"] = -1;
      e["corrupt"] = std::string(v.status().message());
    }
  } else if (absl::IsNotFound(got.status())) {
    e["got"] = 0;
  }
  h.Log(e);
}

int Main(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::cerr << "workload: unexpected argument '" << args[0] << "'\n";
    return 2;
  }
  const std::string history_path = absl::GetFlag(FLAGS_history);
  const int me = absl::GetFlag(FLAGS_id), writers = absl::GetFlag(FLAGS_writers),
            objects = absl::GetFlag(FLAGS_objects);
  const uint64_t min_size = std::max<uint64_t>(absl::GetFlag(FLAGS_min_size), kHeaderBytes);
  const uint64_t max_size = std::max(absl::GetFlag(FLAGS_max_size), min_size);
  if (history_path.empty() || writers < 1 || objects < 1 || me < 0 || me >= writers) {
    std::cerr << "workload: need --history FILE, --writers >= 1, --objects >= 1, 0 <= --id < "
                 "--writers\n";
    return 2;
  }
  History h(history_path);
  if (!h.ok()) {
    std::cerr << "workload: cannot open " << history_path << ": " << std::strerror(errno) << "\n";
    return 2;
  }
  cli::ClusterFlags cf;
  cf.cluster_dir = absl::GetFlag(FLAGS_cluster_dir);
  cf.ms_type = absl::GetFlag(FLAGS_ms_type);
  auto co = cli::ClientOptionsFor(cf);
  const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::unique_ptr<client::Client> client;
  // The monitor may be down (the thrasher kills it too): keep trying until the deadline.
  for (;;) {
    absl::Status why = co.status();
    if (co.ok()) {
      co->op_timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
      co->mon_timeout = absl::Seconds(5);
      auto c = client::Client::Create(*co);
      if (c.ok()) {
        client = std::move(*c);
        break;
      }
      why = c.status();
    }
    if (absl::Now() >= deadline || g_stop) {
      std::cerr << "workload " << me << ": cluster unreachable: " << why << "\n";
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  client::Client& c = *client;

  if (absl::GetFlag(FLAGS_final_read)) {
    for (int w = 0; w < writers; ++w) {
      for (int i = 0; i < objects; ++i) Read(c, h, me, Oid(w, i));
    }
    return 0;
  }

  std::map<std::string, uint64_t> version = VersionsInHistory(history_path, me);
  std::map<std::string, bool> exists;  // as far as this writer knows (failed ops: maybe)
  for (const auto& [oid, v] : version) exists[oid] = true;
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) * 1000003 + static_cast<uint64_t>(me) +
                      version.size());
  std::uniform_real_distribution<double> unit(0, 1);
  // Paced: the store does not reclaim overwritten space yet, so a run's disk use is its
  // write rate times its length.
  const double rate = absl::GetFlag(FLAGS_rate);
  const absl::Duration period = rate > 0 ? absl::Seconds(1 / rate) : absl::ZeroDuration();
  absl::Time next = absl::Now();
  while (!g_stop && absl::Now() < deadline) {
    next += period;
    if (const absl::Time now = absl::Now(); next > now) {
      absl::SleepFor(next - now);
    } else {
      next = now;  // behind (ops took longer): no burst to catch up
    }
    const double pick = unit(rng);
    if (pick < 0.4) {
      Read(c, h, me, Oid(static_cast<int>(rng() % writers), static_cast<int>(rng() % objects)));
      continue;
    }
    const std::string oid = Oid(me, static_cast<int>(rng() % objects));
    const uint64_t v = ++version[oid];
    if (pick < 0.52 && exists[oid]) {
      h.Log(Start(me, "d", oid, v, 0));
      absl::Status s = c.Delete(oid);
      if (absl::IsNotFound(s)) s = absl::OkStatus();  // gone either way
      h.Log(End(me, "d", oid, v, s));
      exists[oid] = !s.ok();
      continue;
    }
    const double span = std::log(static_cast<double>(max_size) / static_cast<double>(min_size));
    const auto size = static_cast<uint64_t>(static_cast<double>(min_size) * std::exp(unit(rng) * span));
    auto data = std::make_shared<const std::string>(MakeContent(oid, v, size));
    h.Log(Start(me, "w", oid, v, size));
    absl::Status s = c.Write(oid, data);
    h.Log(End(me, "w", oid, v, s));
    exists[oid] = true;
  }
  return 0;
}

}  // namespace
}  // namespace msgr::thrash

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  spdlog::set_default_logger(spdlog::stderr_color_mt("workload"));
  spdlog::set_level(spdlog::level::warn);
  signal(SIGTERM, [](int) { msgr::thrash::g_stop = true; });
  signal(SIGPIPE, SIG_IGN);
  auto args = msgr::cli::ParseDashedFlagsWithConf(argc, argv, {"cluster-dir", "ms-type", "timeout"});
  if (!args.ok()) {
    std::cerr << "workload: " << args.status().message() << "\n";
    return 2;
  }
  return msgr::thrash::Main(*args);
}
