// In-memory index of the object store: object id -> the writes (extents) that make up
// its current contents. Rebuilt from the log on Open.
//
// Writes are applied by sequence number, not by arrival order: two writers to the same
// object may finish their pwritev out of order, and recovery replays the log in seq
// order, so the index must give the same answer either way. An extent fully covered
// by newer ones (one, or several together) is dropped; a truncating write drops every
// older extent. (An extent partly covered stays whole: its checksum covers all of it.)
//
// A write of several records (kContinued parts, then a last part) is held apart until its
// last part arrives and then applied as one write at the last part's seq: readers never
// see part of it, and a later-committed write wins over an earlier-committed one even if
// that one began first.
//
// Compaction (object_store_compact.cc) moves live extents to new records: Relocate
// repoints an extent still present, and recovery applies a copy at the seq of the write it
// copies; a copy of an extent already present (the original survived, or a crash came
// between copy and unlink) is a duplicate and is dropped. The index keeps, per segment,
// the log bytes of the records it references (LiveBytes) and how many parts of open
// writes are there (HasOpenParts): what the compactor picks segments by.
// Not thread-safe: the store guards it with its mutex.
#ifndef MSGR_OSD_SIM_STORE_OBJECT_INDEX_H_
#define MSGR_OSD_SIM_STORE_OBJECT_INDEX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/node_hash_map.h"

namespace msgr::store {

// One write's bytes: where they live and what they cover in the object.
struct Extent {
  uint64_t seq = 0;         // log sequence number of the record
  uint64_t object_off = 0;  // first object byte covered
  uint64_t len = 0;         // bytes covered (0: only extends the size)
  uint32_t payload_crc = 0;
  uint64_t segment_id = 0;  // file-backed: segment holding the payload
  uint64_t file_off = 0;    // file-backed: payload offset in that segment
  uint64_t record_bytes = 0;  // log bytes of its record (memory mode: len): live bytes
  // 0: a write of one record (or a copy). Else the seq of the first part of the write of
  // several records it belongs to (whose parts all have the last part's seq here).
  uint64_t first_seq = 0;
  std::shared_ptr<const std::string> mem;  // memory mode: the payload itself

  uint64_t end() const { return object_off + len; }
};

struct ObjectEntry {
  uint64_t trunc_seq = 0;       // extents older than this were replaced
  // Seq of the first record of the write at trunc_seq (== trunc_seq unless it was a write
  // of several records): that write's records have seqs in [trunc_first_seq, trunc_seq].
  uint64_t trunc_first_seq = 0;
  std::vector<Extent> extents;  // sorted by seq, oldest first
  // The newest truncating write was a delete and nothing newer has been applied: the
  // object does not exist (the entry stays, so that an older write still in flight
  // cannot bring it back).
  bool deleted = false;

  // Object size: the furthest byte any live write reached.
  uint64_t Size() const;
};

class ObjectIndex {
 public:
  ObjectIndex() = default;
  ObjectIndex(const ObjectIndex&) = delete;  // names_ points into objects_
  ObjectIndex& operator=(const ObjectIndex&) = delete;
  // Applies a write to `oid`. If `truncate`, the write replaces every older write.
  // Returns the payload bytes no longer referenced (replaced extents, or `e` itself if a
  // newer write already covers it): memory mode frees them.
  uint64_t Apply(std::string_view oid, Extent e, bool truncate);
  // Applies a delete of `oid` at log position `seq`: every older write is dropped and the
  // object is gone unless a newer write was applied already. Returns the bytes freed.
  uint64_t Delete(std::string_view oid, uint64_t seq);

  // Writes of several records, whose parts follow each other in the object (each starts
  // where the previous ended). BeginWrite starts write `id` of `oid` with its first part
  // (replacing a write of that id not finished: its parts are returned to the caller's
  // accounting as freed bytes); AddPart adds a middle part and Commit applies every part
  // plus `last`, all at last.seq. Both refuse (false / nullopt, nothing applied) a part
  // of a write that is not open (aborted, or never begun) and drop the write when the
  // part does not start where the previous one ended (one is missing: recovery skipped a
  // corrupt or unsynced record). Abort drops an open write. The uint64_t results: payload
  // bytes no longer referenced, as for Apply.
  uint64_t BeginWrite(std::string_view oid, uint32_t id, Extent first, bool truncate);
  // `*dropped`: payload bytes of the parts of a write dropped for a missing part.
  bool AddPart(std::string_view oid, uint32_t id, Extent part, uint64_t* dropped);
  bool HasWrite(std::string_view oid, uint32_t id) const;
  // Where the next part of open write `id` must start; nullopt if it is not open.
  std::optional<uint64_t> NextPartOffset(std::string_view oid, uint32_t id) const;
  std::optional<uint64_t> Commit(std::string_view oid, uint32_t id, Extent last,
                                 uint64_t* dropped);
  uint64_t Abort(std::string_view oid, uint32_t id);
  size_t open_writes() const { return open_.size(); }
  // Drops every open write (recovery: their writers are gone); returns how many.
  size_t DropOpenWrites();

  // Returns a copy of the object's entry, or nullopt if it was never written (or was
  // deleted).
  std::optional<ObjectEntry> Lookup(std::string_view oid) const;
  // The entry itself, deleted or not (nullptr if there is none); valid until the next
  // call that changes the index.
  const ObjectEntry* Peek(std::string_view oid) const;

  // Compaction: if `oid` still has extent `from` (same seq, range and place), moves it
  // to `segment_id` / `file_off` (a record of `record_bytes`), now a write of one record
  // (first_seq 0), and returns true; false if it was replaced meanwhile.
  bool Relocate(std::string_view oid, const Extent& from, uint64_t segment_id,
                uint64_t file_off, uint64_t record_bytes);
  // Record bytes the index references in segment `segment_id` / in all.
  uint64_t LiveBytes(uint64_t segment_id) const;
  uint64_t live_bytes() const { return live_total_; }
  // Whether parts of an open write are in segment `segment_id`.
  bool HasOpenParts(uint64_t segment_id) const;
  // Keys of the open writes.
  std::vector<std::pair<std::string, uint32_t>> OpenWrites() const;

  struct Listed {
    std::string oid;
    uint64_t size = 0;
  };
  // Up to `max` existing objects whose id starts with `prefix` and sorts after `after`
  // (byte order), in that order: one page of a listing. O(log objects + the page's
  // length + deleted entries skipped).
  std::vector<Listed> List(std::string_view prefix, std::string_view after, size_t max) const;

  // An object written or deleted at or after a point of the log (ListWrittenSince).
  struct Written {
    std::string oid;
    uint64_t seq = 0;      // the seq its current state applies at (newest write or delete)
    bool deleted = false;  // that was a delete: the object does not exist
    uint64_t size = 0;     // 0 when deleted
  };
  // Up to `max` objects whose id starts with `prefix` and sorts after `after`, existing or
  // deleted, whose current state applies at a seq >= `since`, in id order. Walks every
  // entry under the prefix (O(entries), no payload read): for rare scans such as a
  // returning primary's candidates (osd_sim/peering.h). A deleted entry is found only
  // while the index remembers it: within a run always, after Open only if the delete
  // record was still in the log (compaction drops it once nothing older is left).
  std::vector<Written> ListWrittenSince(std::string_view prefix, std::string_view after,
                                        uint64_t since, size_t max) const;

  // Objects that exist (deleted ones not counted).
  size_t object_count() const { return objects_.size() - deleted_; }

 private:
  struct OpenWrite {
    bool truncate = false;       // the first part truncates
    uint64_t next_off = 0;       // where the next part must start
    std::vector<Extent> parts;   // in offset order, contiguous
  };
  using WriteKey = std::pair<std::string, uint32_t>;
  // Erases an open write; returns its parts' payload bytes.
  uint64_t Drop(std::map<WriteKey, OpenWrite>::iterator it);
  // The entry of `oid`, made (empty) if there is none.
  ObjectEntry& Entry(std::string_view oid);
  void AddLive(const Extent& e);
  void RemoveLive(const Extent& e);
  void AddOpenPart(const Extent& e) { ++open_parts_[e.segment_id]; }
  void RemoveOpenPart(const Extent& e);
  // Looked up by string_view (no copy of the name per write); nodes stay put.
  absl::node_hash_map<std::string, ObjectEntry> objects_;
  // Every entry of objects_ (never erased; a node_hash_map's nodes stay put), by id,
  // for List.
  std::map<std::string_view, const ObjectEntry*> names_;
  size_t deleted_ = 0;  // entries of objects_ with `deleted` set
  std::map<WriteKey, OpenWrite> open_;
  std::unordered_map<uint64_t, uint64_t> live_;  // segment id -> record bytes referenced
  uint64_t live_total_ = 0;
  std::unordered_map<uint64_t, uint64_t> open_parts_;  // segment id -> parts of open writes
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_OBJECT_INDEX_H_
