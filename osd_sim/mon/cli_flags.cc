#include "osd_sim/mon/cli_flags.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace msgr::mon {

absl::StatusOr<CliFlags> CliFlags::Parse(int argc, char** argv,
                                         const std::set<std::string>& known) {
  CliFlags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      f.values_["help"] = "";
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      f.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (known.count(name) != 0) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    if (known.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    f.values_[name] = value;
  }
  return f;
}

const std::vector<std::string>& AlternativeFlags(const std::string& name) {
  static const auto* const kGroups = new std::vector<std::vector<std::string>>{
      {"public-addr", "public-network"}, {"cluster-addr", "cluster-network"}};
  static const auto* const kNone = new std::vector<std::string>();
  for (const auto& g : *kGroups) {
    if (std::find(g.begin(), g.end(), name) != g.end()) return g;
  }
  return *kNone;
}

void CliFlags::SetDefaults(const std::map<std::string, std::string>& defaults) {
  for (const auto& [name, value] : defaults) {
    const auto& group = AlternativeFlags(name);
    const bool given = std::any_of(group.begin(), group.end(),
                                   [&](const std::string& g) { return values_.count(g) != 0; });
    if (!given) values_.try_emplace(name, value);
  }
}

std::string CliFlags::Get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

absl::StatusOr<uint64_t> CliFlags::GetUint(const std::string& name, uint64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  uint64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " wants a non-negative integer, got '", it->second, "'"));
  }
  return v;
}

}  // namespace msgr::mon
