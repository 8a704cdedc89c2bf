// Who may call what on the monitor, decided from the caller's entity name alone (the CN of
// its verified client certificate), so the rules are unit tested without a socket:
//
//   client.admin   everything (MarkOut/MarkIn/CreatePool and every future admin call need it)
//   osd.K          BootOsd / Heartbeat for id K only; GetMap / WatchMap
//   client.NAME    GetMap / WatchMap
//   mon            GetMap / WatchMap
//
// Anything else (no certificate, or a CN of no known kind) may do nothing. A monitor
// serving without authentication does not call these: every caller may do everything.
//
// Thread-safety: pure functions.
#ifndef MSGR_OSD_SIM_MON_CONTROL_ROLES_H_
#define MSGR_OSD_SIM_MON_CONTROL_ROLES_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace msgr::mon {

enum class ControlOp { kBootOsd, kHeartbeat, kGetMap, kWatchMap, kMarkOut, kMarkIn, kCreatePool,
                       kBlocklist };

// OK if `entity` may do `op` (`osd_id`: the OSD the call is about, for BootOsd, Heartbeat,
// MarkOut, MarkIn). Otherwise PERMISSION_DENIED naming the entity, what it tried and what it
// needed, e.g. "client.bench may not mark OSDs out: needs client.admin"; UNAUTHENTICATED if
// `entity` is empty.
absl::Status AuthorizeControl(const std::string& entity, ControlOp op, uint32_t osd_id);

// The verified CN of the caller's certificate (GRPC_X509_CN_PROPERTY_NAME of the call's
// AuthContext); empty if the call is not over authenticated TLS.
std::string PeerEntity(const grpc::ServerContext& ctx);

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_CONTROL_ROLES_H_
