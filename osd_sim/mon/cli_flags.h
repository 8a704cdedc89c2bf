// A tiny command-line parser for the mon tools: `--name value` and `--name=value` flags
// (names with dashes, as in `--data-dir`), plus positional words. absl flags would want
// `--data_dir`, which the cluster scripts do not use.
//
// Thread-safety: a CliFlags is a plain value; use from one thread.
#ifndef MSGR_OSD_SIM_MON_CLI_FLAGS_H_
#define MSGR_OSD_SIM_MON_CLI_FLAGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace msgr::mon {

class CliFlags {
 public:
  // Parses argv[1..]; every flag must be in `known` (names without the leading dashes).
  // `--help` / `-h` yields a flag "help" with an empty value.
  static absl::StatusOr<CliFlags> Parse(int argc, char** argv,
                                        const std::set<std::string>& known);

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::string Get(const std::string& name, const std::string& def = "") const;
  // INVALID_ARGUMENT naming the flag if the value is not a non-negative integer.
  absl::StatusOr<uint64_t> GetUint(const std::string& name, uint64_t def) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_CLI_FLAGS_H_
