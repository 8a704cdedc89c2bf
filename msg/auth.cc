// AuthConfig::FromKeyringFile (declared in msg/messenger.h).
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "msg/messenger.h"

namespace msgr {
namespace {

bool IsHex(absl::string_view s) {
  if (s.empty() || s.size() % 2 != 0) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "hex:" and "base64:" prefixes are explicit (a value that is not what its prefix says is
// an error, returned as nullopt with `*why` set); otherwise a Ceph-style base64 key
// ("AQD...=="), then an even-length hex string, then the raw text.
std::optional<std::string> DecodeSecret(absl::string_view v, std::string* why) {
  std::string out;
  if (absl::ConsumePrefix(&v, "hex:")) {
    // absl::HexStringToBytes does not check: "zz" would become one zero byte.
    if (!v.empty() && !IsHex(v)) {
      *why = "'hex:' value is not an even number of hex digits";
      return std::nullopt;
    }
    return absl::HexStringToBytes(v);
  }
  if (absl::ConsumePrefix(&v, "base64:")) {
    if (!absl::Base64Unescape(v, &out)) {
      *why = "'base64:' value is not valid base64";
      return std::nullopt;
    }
    return out;
  }
  if (absl::EndsWith(v, "=") && absl::Base64Unescape(v, &out) && !out.empty()) return out;
  if (IsHex(v)) return absl::HexStringToBytes(v);
  return std::string(v);
}

}  // namespace

absl::StatusOr<AuthConfig> AuthConfig::FromKeyringFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open keyring file '", path,
                                            "': create it with one line 'key = <secret>'"));
  }
  std::string line;
  int lineno = 0;
  errno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#' || l[0] == ';' || l[0] == '[') continue;
    const size_t eq = l.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view k = absl::StripAsciiWhitespace(l.substr(0, eq));
    if (k != "key") continue;
    absl::string_view v = absl::StripAsciiWhitespace(l.substr(eq + 1));
    std::string why;
    std::optional<std::string> decoded = DecodeSecret(v, &why);
    if (!decoded.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("keyring file '", path, "' line ", lineno, ": ", why));
    }
    std::string secret = std::move(*decoded);
    if (secret.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("keyring file '", path, "' line ", lineno, ": empty key"));
    }
    AuthConfig c;
    c.mode = Mode::kSecret;
    c.secret = std::move(secret);
    return c;
  }
  if (in.bad()) {
    // Opened but unreadable: a directory (EISDIR), an I/O error. Not "no key line".
    const int err = errno;
    return absl::InvalidArgumentError(absl::StrCat("cannot read keyring file '", path, "': ",
                                                   err != 0 ? std::strerror(err) : "read error"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("keyring file '", path, "' has no 'key = <secret>' line"));
}

}  // namespace msgr
