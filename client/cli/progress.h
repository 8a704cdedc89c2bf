// A one-line progress bar for the object CLI: "put big.iso  [######    ]  61%  640/1024 MiB
// 812 MiB/s", redrawn in place with '\r' on a terminal; nothing at all otherwise (a pipe or
// a file gets no control characters). Thread-compatible: one thread updates it.
#ifndef MSGR_CLIENT_CLI_PROGRESS_H_
#define MSGR_CLIENT_CLI_PROGRESS_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace msgr::cli {

// The bar's text for `done` of `total` bytes after `elapsed` (no '\r', no newline).
std::string ProgressLine(const std::string& what, uint64_t done, uint64_t total,
                         absl::Duration elapsed);

class Progress {
 public:
  // `enabled`: draw at all (the caller checks isatty and the object's size).
  Progress(std::ostream& out, std::string what, uint64_t total, bool enabled);
  // Redraws if at least 100 ms passed since the last drawing, or at the end.
  void Update(uint64_t done);
  // Draws the final state and ends the line.
  void Finish();

 private:
  std::ostream& out_;
  const std::string what_;
  const uint64_t total_;
  const bool enabled_;
  const absl::Time start_ = absl::Now();
  absl::Time last_ = absl::InfinitePast();
  uint64_t done_ = 0;
};

}  // namespace msgr::cli

#endif  // MSGR_CLIENT_CLI_PROGRESS_H_
