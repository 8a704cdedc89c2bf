#include "osd_sim/mon/cli_flags.h"

#include <algorithm>
#include <cstdint>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace msgr::mon {
namespace {

std::string Underscored(absl::string_view name) {
  return absl::StrReplaceAll(name, {{"-", "_"}});
}

std::string Dashed(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

// A flag this binary defines: not one of Abseil's own (--flagfile, --helpfull ...), which
// would be there whenever libabsl_flags_parse is linked, and which we do not implement.
absl::CommandLineFlag* FindOurFlag(absl::string_view underscored) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(underscored);
  if (flag == nullptr || flag->IsRetired() || absl::StrContains(flag->Filename(), "absl/flags/")) {
    return nullptr;
  }
  return flag;
}

// What a flag of this type wants, for an error message; "" for a type we do not name.
std::string Wants(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<uint64_t>() || flag.IsOfType<uint32_t>() || flag.IsOfType<uint16_t>()) {
    return "a non-negative integer";
  }
  if (flag.IsOfType<int64_t>() || flag.IsOfType<int32_t>() || flag.IsOfType<int16_t>()) {
    return "an integer";
  }
  if (flag.IsOfType<double>() || flag.IsOfType<float>()) return "a number";
  return "";
}

// Sets `flag` from `value`; `spelled` is the flag as the user wrote it, for the error.
absl::Status SetFlag(absl::CommandLineFlag& flag, absl::string_view spelled,
                     absl::string_view value) {
  std::string error;
  if (flag.ParseFrom(value, &error)) return absl::OkStatus();
  const std::string wants = Wants(flag);
  if (!wants.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(spelled, " wants ", wants, ", got '", value, "'"));
  }
  return absl::InvalidArgumentError(absl::StrCat(spelled, ": ", error));
}

}  // namespace

const std::vector<std::string>& AlternativeFlags(const std::string& name) {
  static const auto* const kGroups = new std::vector<std::vector<std::string>>{
      {"public-addr", "public-network"}, {"cluster-addr", "cluster-network"}};
  static const auto* const kNone = new std::vector<std::string>();
  for (const auto& g : *kGroups) {
    if (std::find(g.begin(), g.end(), name) != g.end()) return g;
  }
  return *kNone;
}

bool ParsedFlags::Given(absl::string_view name) const {
  return given_.count(Underscored(name)) != 0;
}

bool ParsedFlags::Has(absl::string_view name) const {
  return Given(name) || defaulted_.count(Underscored(name)) != 0;
}

int ParsedFlags::GivenAt(absl::string_view name) const {
  auto it = given_.find(Underscored(name));
  return it == given_.end() ? -1 : it->second;
}

absl::Status ParsedFlags::ApplyDefaults(const std::map<std::string, std::string>& settings) {
  for (const auto& [name, value] : settings) {
    std::vector<std::string> group = AlternativeFlags(Dashed(name));
    if (group.empty()) group.push_back(name);
    const bool given = std::any_of(group.begin(), group.end(),
                                   [&](const std::string& g) { return Has(g); });
    if (given) continue;
    absl::CommandLineFlag* flag = FindOurFlag(Underscored(name));
    const std::string spelled = absl::StrCat("--", Dashed(name));
    if (flag == nullptr) return absl::InvalidArgumentError("unknown flag " + spelled);
    absl::Status s = SetFlag(*flag, spelled, value);
    if (!s.ok()) return s;
    defaulted_.insert(Underscored(name));
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<std::string>& args,
                                       const FlagParseOptions& options) {
  ParsedFlags f;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      f.positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      f.help_ = true;
      continue;
    }
    const bool two_dashes = arg[1] == '-';
    absl::string_view body = absl::string_view(arg).substr(two_dashes ? 2 : 1);
    absl::string_view name = body, value;
    const bool has_value = body.find('=') != absl::string_view::npos;
    if (has_value) {
      name = body.substr(0, body.find('='));
      value = body.substr(body.find('=') + 1);
    }
    // The flag as the user spelled it, for errors: "-b", "--data-dir".
    const std::string spelled(
        absl::string_view(arg).substr(0, arg.size() - body.size() + name.size()));
    std::string key = Underscored(name);
    if (!two_dashes) {
      auto alias = options.short_names.find(std::string(name));
      if (alias != options.short_names.end()) key = alias->second;
    }
    absl::CommandLineFlag* flag = key.empty() ? nullptr : FindOurFlag(key);
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(key, "no")) {
      // --noverify: a bool set to false.
      absl::CommandLineFlag* positive = FindOurFlag(key.substr(2));
      if (positive != nullptr && positive->IsOfType<bool>()) {
        if (has_value) return absl::InvalidArgumentError(absl::StrCat(spelled, " takes no value"));
        flag = positive;
        key = key.substr(2);
        negated = true;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(options.unknown_as_argument
                                             ? absl::StrCat("unknown argument '", arg, "'")
                                             : "unknown flag " + Dashed(spelled));
    }
    std::string text;
    if (flag->IsOfType<bool>()) {
      // Only true or false after '=' (Abseil alone would take yes, y, 1 ... too): one
      // spelling each, and `--verify=yes` stays the usage error the bench always gave.
      if (has_value && value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat(spelled, " takes true or false, not '", value, "'"));
      }
      text = has_value ? std::string(value) : negated ? "false" : "true";
    } else if (has_value) {
      text = std::string(value);
    } else {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(spelled, " needs a value"));
      }
      text = args[++i];
    }
    absl::Status s = SetFlag(*flag, spelled, text);
    if (!s.ok()) return s;
    f.given_[key] = static_cast<int>(i);
  }
  return f;
}

absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv, const FlagParseOptions& options) {
  return ParseFlags(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), options);
}

std::string FlagsHelp() {
  std::map<std::string, const absl::CommandLineFlag*> ours;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (FindOurFlag(name) == flag) ours[std::string(name)] = flag;
  }
  std::string out;
  for (const auto& [name, flag] : ours) {
    const std::string def = flag->DefaultValue();
    absl::StrAppend(&out, "  --", Dashed(name), "  ", flag->Help(),
                    def.empty() ? "" : absl::StrCat(" (default: ", def, ")"), "\n");
  }
  return out;
}

void ResetFlagsDefinedIn(absl::string_view file) {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename() != file) continue;
    std::string error;
    // A flag's default always parses back (Abseil checks that round trip in debug builds).
    flag->ParseFrom(flag->DefaultValue(), &error);
  }
}

std::string FlagValueText(absl::string_view name) {
  absl::CommandLineFlag* flag = FindOurFlag(Underscored(name));
  return flag == nullptr ? "" : flag->CurrentValue();
}

}  // namespace msgr::mon
