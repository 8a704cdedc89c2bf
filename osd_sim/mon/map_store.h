// Persistence of the monitor's cluster map: one small protobuf-text file in the mon's data
// dir, replaced atomically on every new epoch (see file_util.h: WriteFileAtomic).
//
// Thread-safety: stateless functions; the caller serialises saves of one data dir (the
// monitor saves under its own mutex).
#ifndef MSGR_OSD_SIM_MON_MAP_STORE_H_
#define MSGR_OSD_SIM_MON_MAP_STORE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/mon.pb.h"

namespace msgr::mon {

// File name of the persisted map inside the data dir.
inline constexpr char kMapFileName[] = "cluster_map.txtpb";

std::string MapPath(const std::string& data_dir);

// Loads the persisted map. std::nullopt when the data dir holds none yet (a new cluster);
// DATA_LOSS when the file exists but cannot be parsed. A leftover temp file from a crash
// in the middle of a save is ignored.
absl::StatusOr<std::optional<v1::ClusterMap>> LoadMap(const std::string& data_dir);

// Atomically replaces the persisted map (creating the data dir if needed).
absl::Status SaveMap(const std::string& data_dir, const v1::ClusterMap& map);

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_MAP_STORE_H_
