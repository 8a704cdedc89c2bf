// //client/bench:bench — the object-write benchmark (see bench_cli.h; run via
// tools/bench.sh).
#include <iostream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/bench/bench_cli.h"
#include "msg/base/malloc_policy.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // Object buffers (one per write when the objects do not fit its cache) are reused.
  msgr::KeepFreedMemoryForReuse();
  // Debian's Abseil is built with Mutex deadlock detection on: a graph update per lock
  // acquisition on every hot path. Tests keep it; the daemons and the bench do not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Logs go to stderr beside the progress lines; stdout carries only the summary.
  spdlog::set_default_logger(spdlog::stderr_color_mt("bench"));
  spdlog::set_level(spdlog::level::warn);
  std::vector<std::string> args(argv + 1, argv + argc);
  return msgr::bench::BenchMain(args, &msgr::AuthConfig::FromKeyringFile, std::cout, std::cerr);
}
