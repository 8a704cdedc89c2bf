#include "client/cli/progress.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace msgr::cli {
namespace {

constexpr int kBarWidth = 24;
constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

std::string ProgressLine(const std::string& what, uint64_t done, uint64_t total,
                         absl::Duration elapsed) {
  done = std::min(done, total);
  const double frac = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(frac * kBarWidth);
  const double secs = absl::ToDoubleSeconds(elapsed);
  const double rate = secs > 0 ? static_cast<double>(done) / kMiB / secs : 0.0;
  return absl::StrFormat("%s [%s%s] %3d%% %.0f/%.0f MiB %.0f MiB/s", what,
                         std::string(filled, '#'), std::string(kBarWidth - filled, ' '),
                         static_cast<int>(frac * 100), static_cast<double>(done) / kMiB,
                         static_cast<double>(total) / kMiB, rate);
}

Progress::Progress(std::ostream& out, std::string what, uint64_t total, bool enabled)
    : out_(out), what_(std::move(what)), total_(total), enabled_(enabled) {}

void Progress::Update(uint64_t done) {
  done_ = done;
  if (!enabled_) return;
  const absl::Time now = absl::Now();
  if (now - last_ < absl::Milliseconds(100) && done < total_) return;
  last_ = now;
  out_ << '\r' << ProgressLine(what_, done_, total_, now - start_) << std::flush;
}

void Progress::Finish() {
  if (!enabled_) return;
  out_ << '\r' << ProgressLine(what_, done_, total_, absl::Now() - start_) << '\n' << std::flush;
}

}  // namespace msgr::cli
