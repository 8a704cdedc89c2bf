// The command-line layer of every binary here (mon, osd, monctl, bench, and the client CLIs
// through client/cli/cluster_options.h): flags are Abseil flags, defined with
// `ABSL_FLAG(type, name_with_underscores, default, "help")` in each binary, and ParseFlags
// below sets them from argv.
//
// Accepted: `--name value` and `--name=value` (one dash works too), names with dashes or
// underscores (`--data-dir` and `--data_dir` are one flag); bools as `--verify`,
// `--verify=true|false` or `--noverify`; one-letter short names a binary maps to a flag
// (`-b 4K`); `--help` / `-h`; `--` ending the flags; every other word positional, in order.
//
// Why our own loop over argv rather than absl::ParseCommandLine (measured with Debian's
// libabsl-dev 20220623, which the WORKSPACE links): absl's parser wants the C identifier
// (`--data_dir`; `--data-dir` is "Unknown command line flag"), reports a bad argument with
// std::exit(1) where our tools exit 2 on bad usage and tests want a Status to look at, and
// adds --flagfile, --fromenv, --undefok, --helpfull ... to every binary. The loop is small:
// parsing a value stays Abseil's (CommandLineFlag::ParseFrom), so a flag's type does the
// checking ("--pollers wants a non-negative integer, got 'x'").
//
// Thread-safety: flags are process globals. Parse in main() before starting threads (or in
// a test, under an absl::FlagSaver, or after ResetFlagsDefinedIn); a ParsedFlags is a plain
// value.
#ifndef MSGR_OSD_SIM_MON_CLI_FLAGS_H_
#define MSGR_OSD_SIM_MON_CLI_FLAGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace msgr::mon {

// Flags that say one thing two ways (an address or the network to pick it from): a layer
// of settings (command line over [osd.K] over [osd] over [global]) that gives one of a
// group overrides a lower layer's other member too, instead of the process getting both.
// Names with dashes; empty for a flag in no group.
const std::vector<std::string>& AlternativeFlags(const std::string& name);

struct FlagParseOptions {
  // One-letter spellings (without the dash) and the flag each stands for: {"b",
  // "object_size"} makes `-b 4K` set --object-size. `-h` is always --help.
  std::map<std::string, std::string> short_names;
  // An unknown flag is "unknown argument '--foo=1'" (the whole word, the bench's wording,
  // which its scripts look for) rather than "unknown flag --foo".
  bool unknown_as_argument = false;
};

// What a command line gave; the values themselves are in the flags (absl::GetFlag).
class ParsedFlags {
 public:
  bool help() const { return help_; }
  const std::vector<std::string>& positional() const { return positional_; }

  // The command line gave the flag. `name` with dashes or underscores.
  bool Given(absl::string_view name) const;
  // Given, or set by ApplyDefaults.
  bool Has(absl::string_view name) const;
  // Where the command line last gave the flag (its index in the arguments), or -1: for
  // two flags that set one thing, the later wins.
  int GivenAt(absl::string_view name) const;

  // A config file's settings under the command line's: sets each flag of `settings`
  // (name -> value text, as LoadSettings gives them) unless the command line gave it or
  // one of its AlternativeFlags (nor did an earlier setting give an alternative).
  // INVALID_ARGUMENT naming the flag when a value does not parse or no such flag is
  // defined; flags set before the error keep their values.
  absl::Status ApplyDefaults(const std::map<std::string, std::string>& settings);

 private:
  friend absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<std::string>& args,
                                                const FlagParseOptions& options);
  bool help_ = false;
  std::vector<std::string> positional_;
  std::map<std::string, int> given_;  // flag name (underscores) -> last index in args
  std::set<std::string> defaulted_;   // set by ApplyDefaults
};

// Parses `args` (the program name excluded) into the flags defined in this binary (not
// Abseil's own, such as --flagfile). INVALID_ARGUMENT naming the flag as it was spelled:
// "unknown flag --foo", "--mon needs a value", "--pollers wants a non-negative integer,
// got 'x'", "--verify takes true or false, not 'yes'". A flag given twice: the last wins.
// Never exits.
absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<std::string>& args,
                                       const FlagParseOptions& options = {});
// The same for main()'s argv (argv[0] skipped).
absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv,
                                       const FlagParseOptions& options = {});

// Sets every flag defined in `file` (pass __FILE__ from the file with the ABSL_FLAGs) back
// to its default: for a parser called more than once in a process (absl::FlagSaver would do
// too, but logs a line per flag it restores).
void ResetFlagsDefinedIn(absl::string_view file);

// Every flag this binary defines, one a line: `  --name-with-dashes  help (default: X)`
// (no default shown when it is empty), sorted by name. For a --helpfull.
std::string FlagsHelp();

// The current value of a flag as text ("" if there is no such flag): for code that knows a
// flag by name only (a --conf or --cluster-dir the binary defines).
std::string FlagValueText(absl::string_view name);

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_CLI_FLAGS_H_
