// A tiny command-line parser for the mon, the osd and monctl: `--name value` and
// `--name=value` flags (names with dashes, as in `--data-dir`), plus positional words.
//
// Not Abseil flags, measured with Debian's libabsl-dev 20220623 (linked by the WORKSPACE,
// absl_flags_parse included; it links and runs): an ABSL_FLAG's name is a C identifier, so
// `--data-dir` is refused ("ERROR: Unknown command line flag 'data-dir'") and would have to
// become `--data_dir` or be rewritten in argv first, with absl's messages and --help then
// naming `data_dir`; absl::ParseCommandLine reports a bad argument with std::exit(1) (our
// tools exit 2 on bad usage, and a test could check errors only as death tests: a parse
// that returns its errors came in a later Abseil), prints its own --help and exits 1, and
// adds --flagfile, --fromenv, --undefok, --helpfull ... to every binary.
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

// Flags that say one thing two ways (an address or the network to pick it from): a layer
// of settings (command line over [osd.K] over [osd] over [global]) that gives one of a
// group overrides a lower layer's other member too, instead of the process getting both.
// Empty for a flag in no group.
const std::vector<std::string>& AlternativeFlags(const std::string& name);

class CliFlags {
 public:
  // Parses argv[1..]; every flag must be in `known` (names without the leading dashes).
  // `--help` / `-h` yields a flag "help" with an empty value.
  static absl::StatusOr<CliFlags> Parse(int argc, char** argv,
                                        const std::set<std::string>& known);

  // Each of `defaults` (flag name -> value, as ClusterConf::SettingsFor gives them) that
  // the command line did not give, nor an alternative of (AlternativeFlags): a config
  // file's settings under the command line's.
  void SetDefaults(const std::map<std::string, std::string>& defaults);

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
