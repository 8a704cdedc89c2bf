// RoCE GID selection (see gid_select.h).
#include "msg/rdma/verbs/ibverbs/gid_select.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace msgr {
namespace verbs {
namespace ibverbs {

namespace {

bool IsIpv4Mapped(const Gid& gid) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.data(), kPrefix, sizeof(kPrefix)) == 0;
}

bool IsLinkLocal(const Gid& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

std::string TableString(absl::Span<const GidEntry> entries) {
  if (entries.empty()) return "none";
  std::string out;
  for (const GidEntry& e : entries) absl::StrAppend(&out, out.empty() ? "" : ", ", GidEntryString(e));
  return out;
}

}  // namespace

std::string GidEntryString(const GidEntry& e) {
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, e.gid.data(), buf, sizeof(buf));
  return absl::StrCat(buf, " (index ", e.index, ", RoCE ", e.roce_v2 ? "v2" : "v1", ")");
}

absl::StatusOr<int> SelectGidIndex(absl::Span<const GidEntry> entries, int table_len,
                                   int option, const char* env, absl::string_view device) {
  int wanted = option;
  std::string source = "DeviceOptions::gid_index";
  if (wanted < 0 && env != nullptr && *env != '\0') {
    source = absl::StrCat("MSGR_RDMA_GID_INDEX='", env, "'");
    if (!absl::SimpleAtoi(env, &wanted) || wanted < 0 || wanted >= table_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, " is not an index below ", table_len, " (the GID table of ", device,
          "); its GIDs: ", TableString(entries)));
    }
  }
  if (wanted >= 0) {
    for (const GidEntry& e : entries) {
      if (e.index == wanted) return wanted;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": GID index ", wanted, " of ", device,
        " is empty (an address its netdev does not have, or another host's numbering); its "
        "GIDs: ", TableString(entries), ". Unset it to pick the port's IPv4 RoCE v2 GID"));
  }
  const GidEntry* v2_global = nullptr;
  const GidEntry* v2_link_local = nullptr;
  for (const GidEntry& e : entries) {
    if (!e.roce_v2) continue;
    if (IsIpv4Mapped(e.gid)) return e.index;
    if (IsLinkLocal(e.gid)) {
      if (v2_link_local == nullptr) v2_link_local = &e;
    } else if (v2_global == nullptr) {
      v2_global = &e;
    }
  }
  if (v2_global != nullptr) return v2_global->index;
  if (v2_link_local != nullptr) return v2_link_local->index;
  if (!entries.empty()) return entries.front().index;
  return absl::FailedPreconditionError(absl::StrCat(
      "the GID table of ", device, " is empty: its netdev has no address yet (RoCE needs "
      "one; rxe fills the table a moment after `rdma link add` and after each address)"));
}

}  // namespace ibverbs
}  // namespace verbs
}  // namespace msgr
