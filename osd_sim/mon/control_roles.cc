#include "osd_sim/mon/control_roles.h"

#include <grpc/grpc_security_constants.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "osd_sim/mon/control_auth.h"

namespace msgr::mon {
namespace {

constexpr char kOsdPrefix[] = "osd.";
constexpr char kClientPrefix[] = "client.";

// True and the id if `entity` is "osd.K".
bool OsdId(const std::string& entity, uint32_t* id) {
  if (!absl::StartsWith(entity, kOsdPrefix)) return false;
  const std::string digits = entity.substr(sizeof(kOsdPrefix) - 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  return absl::SimpleAtoi(digits, id);
}

bool MayRead(const std::string& entity) {
  uint32_t id;
  return entity == kMonEntity || OsdId(entity, &id) ||
         (absl::StartsWith(entity, kClientPrefix) && entity.size() > sizeof(kClientPrefix) - 1);
}

absl::Status Denied(const std::string& entity, const std::string& what,
                    const std::string& needs) {
  return absl::PermissionDeniedError(absl::StrCat(entity, " may not ", what, ": needs ", needs));
}

}  // namespace

absl::Status AuthorizeControl(const std::string& entity, ControlOp op, uint32_t osd_id) {
  if (entity.empty()) {
    return absl::UnauthenticatedError(
        "no verified client certificate: this monitor requires mutual TLS (--auth secret)");
  }
  if (entity == kAdminEntity) return absl::OkStatus();
  uint32_t self = 0;
  const bool is_osd = OsdId(entity, &self);
  switch (op) {
    case ControlOp::kGetMap:
    case ControlOp::kWatchMap:
      if (MayRead(entity)) return absl::OkStatus();
      return Denied(entity, "read the cluster map", "an osd.K, client.NAME or mon certificate");
    case ControlOp::kBootOsd:
    case ControlOp::kHeartbeat:
      if (is_osd && self == osd_id) return absl::OkStatus();
      return Denied(entity,
                    absl::StrCat(op == ControlOp::kBootOsd ? "boot" : "heartbeat as", " osd.",
                                 osd_id),
                    absl::StrCat("osd.", osd_id, " (an OSD acts only as itself) or ",
                                 kAdminEntity));
    case ControlOp::kMarkOut:
      return Denied(entity, "mark OSDs out", kAdminEntity);
    case ControlOp::kMarkIn:
      return Denied(entity, "mark OSDs in", kAdminEntity);
    case ControlOp::kCreatePool:
      return Denied(entity, "create pools", kAdminEntity);
    case ControlOp::kBlocklist:
      return Denied(entity, "change the blocklist", kAdminEntity);
  }
  return absl::PermissionDeniedError(absl::StrCat(entity, ": unknown operation"));
}

std::string PeerEntity(const grpc::ServerContext& ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  std::vector<grpc::string_ref> cn = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  // A certificate with several CNs names nobody in particular.
  if (cn.size() != 1) return "";
  return std::string(cn[0].data(), cn[0].size());
}

}  // namespace msgr::mon
