#include "osd_sim/mon/map_store.h"

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "msg/base/file_util.h"

namespace msgr::mon {

std::string MapPath(const std::string& data_dir) {
  return absl::StrCat(data_dir, "/", kMapFileName);
}

absl::StatusOr<std::optional<v1::ClusterMap>> LoadMap(const std::string& data_dir) {
  const std::string path = MapPath(data_dir);
  absl::StatusOr<std::string> text = ReadFile(path);
  if (absl::IsNotFound(text.status())) return std::optional<v1::ClusterMap>();
  if (!text.ok()) return text.status();
  v1::ClusterMap map;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &map)) {
    return absl::DataLossError(absl::StrCat(
        "cannot parse the cluster map in ", path,
        " (corrupt file? move it away to start a new cluster)"));
  }
  if (map.epoch() == 0 || map.pg_num() == 0 || map.fsid().empty()) {
    return absl::DataLossError(
        absl::StrCat("cluster map in ", path, " lacks epoch, pg_num or fsid"));
  }
  return std::optional<v1::ClusterMap>(std::move(map));
}

absl::Status SaveMap(const std::string& data_dir, const v1::ClusterMap& map) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(map, &text)) {
    return absl::InternalError("cannot serialise the cluster map");
  }
  absl::Status s = MakeDirs(data_dir);
  if (!s.ok()) return s;
  return WriteFileAtomic(MapPath(data_dir), text);
}

}  // namespace msgr::mon
