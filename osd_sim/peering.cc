#include "osd_sim/peering.h"

#include <pthread.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "msg/base/crc32c.h"
#include "osd_sim/store/record.h"
#include "spdlog/spdlog.h"

namespace msgr::osd {
namespace {

// A peer that does not answer a query this fast is retried (the monitor marks a dead one
// down within its grace; the PG waits meanwhile).
constexpr absl::Duration kQueryTimeout = absl::Seconds(2);
constexpr size_t kNamesPage = 1000;
// The state file is rewritten this often when it changed (the PGs' watermarks advance
// with every write): a restart then finds watermarks this old at most.
constexpr absl::Duration kStateRefresh = absl::Seconds(1);
// A returning primary with more candidates than this (written after its watermark)
// compares whole copies instead: fetching each whole would cost more than the compare.
constexpr size_t kMaxCandidates = kMaxMissedObjects / 2;
// A sync keeps up to this many objects (and bytes) in flight to or from one peer.
constexpr size_t kBatchObjects = 32;
constexpr uint64_t kBatchBytes = 32ull << 20;

// How many of the objects from `first` on (their `sizes`) go in one batch: at least one.
size_t BatchOf(const std::vector<uint64_t>& sizes, size_t first) {
  size_t n = 0;
  uint64_t bytes = 0;
  while (first + n < sizes.size() && n < kBatchObjects &&
         (n == 0 || bytes + sizes[first + n] <= kBatchBytes)) {
    bytes += sizes[first + n];
    ++n;
  }
  return n;
}

absl::Status ReplyStatus(const absl::StatusOr<Reply>& r) {
  if (!r.ok()) return r.status();
  return absl::Status(r->code, r->error);
}

// Pages through a pool's objects in name order after `from` (`list(from)`: a page of up
// to kNamesPage, each with its pool-qualified `oid`) and appends the plain ids of those in
// PG `key` to `out` until it holds `max`.
template <typename ListPage>
void CollectPgObjects(const PgId& key, uint32_t pg_num, std::string from, size_t max,
                      ListPage list, std::vector<std::string>* out) {
  while (out->size() < max) {
    auto page = list(from);
    for (auto& o : page) {
      uint32_t pool;
      std::string_view oid;
      if (!placement::SplitPoolObjectName(o.oid, &pool, &oid) || pool != key.pool) continue;
      if (placement::ObjectToPg(oid, pg_num) != key.pg) continue;
      out->emplace_back(oid);
      if (out->size() == max) return;
    }
    if (page.size() < kNamesPage) return;
    from = std::move(page.back().oid);
  }
}

std::string PgName(uint32_t pool, uint32_t pg) { return absl::StrCat(pool, ".", absl::Hex(pg)); }

}  // namespace

Peering::Peering(const PeeringOptions& options, store::ObjectStore* store, Replicator* replicator,
                 PgLog* log)
    : options_(options), store_(store), replicator_(replicator), log_(log) {
  if (log_ != nullptr) log_->SetSequenceSource([store] { return store->NextSeq(); });
  LoadState();
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "osd-peering");
}

Peering::~Peering() { Stop(); }

void Peering::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void Peering::HandleMaps(const std::vector<placement::PlacementMap>& pools) {
  if (pools.empty()) return;
  const int self = static_cast<int>(options_.self);
  absl::MutexLock l(&mu_);
  epoch_ = pools.front().epoch();
  for (const placement::PlacementMap& pm : pools) {
    auto shared = std::make_shared<const placement::PlacementMap>(pm);
    pools_[pm.pool_id()] = shared;
    for (uint32_t pg = 0; pg < pm.pg_num(); ++pg) {
      std::vector<int> up;
      std::vector<uint64_t> up_from;
      for (int id : pm.ActingOfPg(pg)) {
        const placement::OsdEntry* e = pm.Find(id);
        if (e != nullptr && e->up) {
          up.push_back(id);
          up_from.push_back(e->up_from);
        }
      }
      PgState& st = pgs_[PgKey{pm.pool_id(), pg}];
      const bool changed = up != st.up_members || up_from != st.up_from;
      auto member = [self](const std::vector<int>& m, const std::vector<uint64_t>& f,
                           uint64_t* incarnation) {
        for (size_t i = 0; i < m.size(); ++i) {
          if (m[i] == self) {
            *incarnation = f[i];
            return true;
          }
        }
        return false;
      };
      uint64_t now_from = 0, before_from = 0;
      const bool member_now = member(up, up_from, &now_from);
      const bool member_before = member(st.up_members, st.up_from, &before_from);
      if (member_now) {
        // Stays complete only as the same incarnation, a member without a gap, or when the
        // primary already synced it for this epoch (its kPgActivate came before the map).
        if (st.complete && ((member_before && now_from == before_from) || st.as_of >= epoch_)) {
          st.as_of = std::max(st.as_of, epoch_);
        } else {
          st.complete = false;
        }
      } else if (st.as_of < epoch_) {
        // Not a member: a stray copy, complete as of the epoch it left (kept), not now (it
        // gets no writes). Unless the primary already synced it for a newer epoch.
        st.complete = false;
      }
      const bool primary = pm.OsdOfPg(pg) == self && member_now;
      if (!primary) {
        // The log syncs members only while this OSD leads the PG; retired, it still tells
        // a returning primary what it missed meanwhile (pg_log.h).
        if (st.primary && log_ != nullptr) log_->Retire(PgKey{pm.pool_id(), pg});
        st.primary = false;
        st.active = false;
      } else if (changed || !st.primary) {
        // A PG this OSD starts to lead: entries a write admitted just before it last stopped
        // leading may have left are dropped; the log starts with this interval.
        if (!st.primary) {
          if (log_ != nullptr) log_->Reset(PgKey{pm.pool_id(), pg});
          st.lead_from = epoch_;
          st.prev_primary = st.up_members.empty() ? -1 : st.up_members.front();
        }
        st.primary = true;
        st.active = false;
        ++st.interval;
        if (!st.queued) {
          st.queued = true;
          queue_.push_back(PgKey{pm.pool_id(), pg});
        }
      }
      st.up_members = std::move(up);
      st.up_from = std::move(up_from);
    }
  }
  save_pending_ = true;
  cv_.SignalAll();
}

// The state file: one line "POOL PG EPOCH WATERMARK" per PG this OSD's copy was complete
// in, as of that epoch, with the PG's watermark (pg_log.h; 0: unknown) when the line was
// written. Written (tmp + rename) after changes and every kStateRefresh while it changes;
// read at start. A watermark stays true once computed (every write logged after it is
// stored at a seq at or above it, pg_log.h), so the one read back, however old, is never
// newer than the truth when the OSD died. (Builds before the watermark wrote three
// fields, read as an unknown watermark; they cannot read four: no downgrade.)
Peering::StateRows Peering::StateRowsLocked() const {
  StateRows rows;
  for (const auto& [key, st] : pgs_) {
    if (st.as_of > 0) rows.emplace_back(key, st.as_of);
  }
  return rows;
}

std::string Peering::FormatState(const StateRows& rows) const {
  std::string out;
  for (const auto& [key, as_of] : rows) {
    const uint64_t watermark = log_ != nullptr ? log_->Watermark(key) : 0;
    absl::StrAppend(&out, key.pool, " ", key.pg, " ", as_of, " ", watermark, "\n");
  }
  return out.empty() ? "\n" : out;
}

void Peering::SaveState(const std::string& state) {
  if (options_.state_path.empty()) return;
  const std::string tmp = options_.state_path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr || fwrite(state.data(), 1, state.size(), f) != state.size() || fclose(f) != 0 ||
      rename(tmp.c_str(), options_.state_path.c_str()) != 0) {
    spdlog::warn("osd.{}: cannot write {}: {} (a restart will recover its PGs from peers)",
                 options_.self, options_.state_path, strerror(errno));
  }
}

void Peering::LoadState() {
  if (options_.state_path.empty()) return;
  FILE* f = fopen(options_.state_path.c_str(), "r");
  if (f == nullptr) return;  // a new OSD
  unsigned pool, pg;
  unsigned long long as_of, watermark;
  char line[128];
  absl::MutexLock l(&mu_);
  while (fgets(line, sizeof(line), f) != nullptr) {
    const int n = sscanf(line, "%u %u %llu %llu", &pool, &pg, &as_of, &watermark);
    if (n < 3) continue;
    pgs_[PgKey{pool, pg}].as_of = as_of;  // complete as of then, not now
    // What it wrote as primary after its watermark may be nowhere else: candidates until
    // its copy is next replaced from an authority's.
    if (log_ != nullptr) log_->RestoreWatermark(PgKey{pool, pg}, n == 4 ? watermark : 0);
  }
  fclose(f);
}

absl::Status Peering::CheckActive(uint32_t pool, std::string_view oid) const {
  absl::ReaderMutexLock l(&mu_);
  auto p = pools_.find(pool);
  if (p == pools_.end()) {
    return absl::UnavailableError(pools_.empty() ? std::string("the OSD has no map yet")
                                                 : absl::StrCat("no pool ", pool, " in this OSD's map epoch ", epoch_));
  }
  const uint32_t pg = p->second->PgOf(oid);
  auto it = pgs_.find(PgKey{pool, pg});
  if (it != pgs_.end() && it->second.active) return absl::OkStatus();
  if (it == pgs_.end() || !it->second.primary) {
    const int primary = p->second->OsdOfPg(pg);
    if (primary == static_cast<int>(options_.self)) {  // the map has this OSD down
      return absl::UnavailableError(absl::StrCat("osd.", options_.self, " is down in its map epoch ",
                                                 epoch_, " (it boots again with the monitor)"));
    }
    return absl::UnavailableError(absl::StrCat("osd.", options_.self, " is not the primary of pg ",
                                               PgName(pool, pg), " in map epoch ", epoch_,
                                               " (osd.", primary, " is)"));
  }
  return absl::UnavailableError(absl::StrCat("pg ", PgName(pool, pg),
                                             " is peering (its copies are being made complete); "
                                             "the op waits"));
}

absl::Status Peering::CheckPrimary(uint32_t pool, std::string_view oid, uint64_t sender) const {
  uint32_t pg;
  {
    absl::ReaderMutexLock l(&mu_);
    auto p = pools_.find(pool);
    if (p == pools_.end()) {
      return absl::UnavailableError(absl::StrCat("no pool ", pool, " in osd.", options_.self,
                                                 "'s map epoch ", epoch_));
    }
    pg = p->second->PgOf(oid);
  }
  absl::Status s = CheckPrimaryOfPg(pool, pg, sender);
  // Another primary's write, delete or push is about to change this copy: a retired log
  // of the PG no longer describes it.
  if (s.ok() && log_ != nullptr) log_->CopyChanged(PgKey{pool, pg});
  return s;
}

absl::Status Peering::CheckPrimaryOfPg(uint32_t pool, uint32_t pg, uint64_t sender) const {
  absl::ReaderMutexLock l(&mu_);
  auto p = pools_.find(pool);
  if (p == pools_.end() || pg >= p->second->pg_num()) {
    return absl::UnavailableError(absl::StrCat("no pg ", PgName(pool, pg), " in osd.",
                                               options_.self, "'s map epoch ", epoch_));
  }
  const int primary = p->second->OsdOfPg(pg);
  if (primary >= 0 && static_cast<uint64_t>(primary) == sender) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("osd.", sender, " is not the primary of pg ",
                                             PgName(pool, pg), " in osd.", options_.self,
                                             "'s map epoch ", epoch_, " (osd.", primary, " is)"));
}

void Peering::Loop() {
  for (;;) {
    PgKey key{};
    bool have_key = false;
    std::optional<StateRows> rows;
    bool stopping = false;
    {
      absl::MutexLock l(&mu_);
      while (!stop_ && queue_.empty() && !save_pending_) {
        // Now and then, the watermarks: lazily, so a restart finds them a little old.
        if (cv_.WaitWithTimeout(&mu_, kStateRefresh) && !options_.state_path.empty()) {
          save_pending_ = true;
        }
      }
      if (save_pending_) {
        rows = StateRowsLocked();
        save_pending_ = false;
      }
      stopping = stop_;
      if (!stopping && !queue_.empty()) {
        key = queue_.front();
        queue_.pop_front();
        pgs_[key].queued = false;
        have_key = true;
      }
    }
    if (rows.has_value() && !options_.state_path.empty()) {
      std::string state = FormatState(*rows);
      if (state != saved_state_) {  // unchanged: not written again
        SaveState(state);
        saved_state_ = std::move(state);
      }
    }
    if (stopping) return;
    if (!have_key) continue;
    absl::Status s = Peer(key);
    if (s.ok()) continue;
    absl::MutexLock l(&mu_);
    ++counters_.peering_errors;
    spdlog::warn("osd.{}: peering pg {}: {}; retrying", options_.self, PgName(key.pool, key.pg),
                 s.ToString());
    PgState& st = pgs_[key];
    if (st.primary && !st.active && !st.queued) {
      st.queued = true;
      queue_.push_back(key);
    }
    // Let the map move (a silent peer marked down) before the next attempt.
    cv_.WaitWithTimeout(&mu_, options_.retry_delay);
  }
}

absl::Status Peering::Peer(const PgKey& key) {
  const int self = static_cast<int>(options_.self);
  std::shared_ptr<const placement::PlacementMap> pm;
  uint64_t epoch, interval, self_as_of, lead_from;
  int prev_primary;
  bool self_complete;
  std::vector<int> members;
  {
    absl::MutexLock l(&mu_);
    PgState& st = pgs_[key];
    if (!st.primary || st.active) return absl::OkStatus();
    pm = pools_[key.pool];
    epoch = epoch_;
    interval = st.interval;
    self_complete = st.complete;
    self_as_of = st.as_of;
    members = st.up_members;
    lead_from = st.lead_from;
    prev_primary = st.prev_primary;
    ++counters_.peerings;
  }
  const uint32_t pg_num = pm->pg_num();
  // 1. Who has a complete copy, as of when?
  std::vector<int> others;
  for (const placement::OsdEntry& e : pm->osds()) {
    if (e.up && static_cast<int>(e.id) != self) others.push_back(static_cast<int>(e.id));
  }
  auto replies = replicator_->CallAll(
      others,
      [&](uint64_t tid) {
        PgRequest q;
        q.type = kPgQuery;
        q.tid = tid;
        q.pool = key.pool;
        q.pg = key.pg;
        q.epoch = epoch;  // the OSD asked catches up to this map before it answers
        return Encode(q);
      },
      kQueryTimeout);
  // The newest copy known complete, as of when: a current member's as of this epoch; an
  // OSD that left the PG or restarted, as of the last epoch it was a complete member.
  int best = self_as_of > 0 ? self : -1;
  uint64_t best_as_of = self_as_of;
  std::map<int, bool> complete;  // of the others that answered
  std::map<int, uint64_t> as_of;  // of those, as of when (0: a new or emptied copy)
  std::vector<int> held;  // of those, the ones that had a complete copy once
  std::string silent;
  for (size_t i = 0; i < others.size(); ++i) {
    absl::Status s = ReplyStatus(replies[i]);
    auto info = s.ok() ? DecodePgInfoBody(replies[i]->data) : absl::StatusOr<PgInfoBody>(s);
    if (!info.ok()) {
      absl::StrAppend(&silent, silent.empty() ? "" : ", ", "osd.", others[i], " (",
                      info.status().message(), ")");
      continue;
    }
    complete[others[i]] = info->complete;
    as_of[others[i]] = info->as_of_epoch;
    if (info->as_of_epoch > 0) held.push_back(others[i]);
    if (info->as_of_epoch > 0 && (best < 0 || info->as_of_epoch > best_as_of)) {
      best = others[i];
      best_as_of = info->as_of_epoch;
    }
  }
  // Among copies equally new, the one of the OSD that leads the PG when this one is down
  // (the next up member in acting order): with stable placement, the interim primary,
  // whose retired PG log can tell this OSD what it missed (PullFromLog).
  if (best != self && best >= 0) {
    for (int id : pm->ActingOfPg(key.pg)) {
      if (id == self) continue;
      auto a = as_of.find(id);
      if (a != as_of.end() && a->second == best_as_of) {
        best = id;
        break;
      }
    }
  }
  // A copy complete as of this very epoch cannot be beaten; otherwise a silent OSD might
  // hold a newer one.
  if (!silent.empty() && !(best == self && best_as_of >= epoch)) {
    return absl::UnavailableError(absl::StrCat("no answer from ", silent));
  }
  // No up OSD's copy is complete *now* (every holder restarted or was marked down): the
  // newest copy known may be older than one on a member that is down (down members stay in
  // the acting set until marked out), which may have taken writes after it. Wait for those
  // (an operator who knows them gone for good marks them out).
  bool current = self_complete;
  for (const auto& [id, c] : complete) current = current || c;
  if (!current) {
    std::string down;
    for (int id : pm->ActingOfPg(key.pg)) {
      const placement::OsdEntry* e = pm->Find(id);
      if (e != nullptr && !e->up) absl::StrAppend(&down, down.empty() ? "" : ", ", "osd.", id);
    }
    if (!down.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "no up OSD's copy is complete now; waiting for ", down,
          " (down), which may hold a newer one"));
    }
  }
  // 2. Fill this OSD's copy from the best one.
  if (best < 0) {
    // No OSD ever knew its copy complete (a new cluster, every OSD that is in now up, as
    // checked above): merge what they all have (each object this OSD lacks, from the
    // first OSD that has it; nothing is deleted).
    if (log_ != nullptr) log_->Reset(key);  // this copy changes: the log starts again
    for (int id : others) {
      if (absl::Status s = PullFrom(id, key, pg_num, /*authoritative=*/false); !s.ok()) return s;
    }
  } else if (best != self) {
    if (log_ != nullptr) log_->Reset(key);  // this copy changes: the log starts again
    // Writes this OSD admitted under an older map are in its store before the pull (they
    // are among the watermark's candidates, or overwritten by the copy pulled).
    { absl::MutexLock barrier(&admit_mu_); }
    spdlog::info("osd.{}: pg {}: pulling from osd.{} (complete as of epoch {}; this OSD's "
                 "copy as of {})", options_.self, PgName(key.pool, key.pg), best, best_as_of,
                 self_as_of);
    bool pulled = false;
    // A surviving copy (as_of > 0) differs from the best one only by what the best one's
    // log knows it missed and by what it wrote after its watermark: copy just those.
    if (log_ != nullptr && options_.pull_from_log && self_as_of > 0) {
      absl::Status s = PullFromLog(best, key, pg_num, epoch, self_as_of);
      pulled = s.ok();
      if (!pulled) {
        absl::MutexLock l(&mu_);
        ++counters_.log_pull_fallbacks;
        spdlog::info("osd.{}: pg {}: compares its whole copy with osd.{}'s: {}", options_.self,
                     PgName(key.pool, key.pg), best, s.ToString());
      }
    }
    if (!pulled) {
      if (absl::Status s = PullFrom(best, key, pg_num, /*authoritative=*/true); !s.ok()) return s;
    }
    // Equal to the authority's now: what it wrote as primary before is settled.
    if (log_ != nullptr) log_->Resynced(key);
  }
  // A member down as this OSD starts to lead the PG, which led it before, may come back
  // to lead it again: the log follows it from its start (pg_log.h, TrackAbsent: its copy
  // lacks nothing acknowledged before the log began if it was complete up to the map
  // before lead_from, which it asks with; its own unacknowledged writes it adds itself).
  if (log_ != nullptr && prev_primary >= 0 && prev_primary != self &&
      std::find(members.begin(), members.end(), prev_primary) == members.end()) {
    const std::vector<int> acting = pm->ActingOfPg(key.pg);
    if (std::find(acting.begin(), acting.end(), prev_primary) != acting.end()) {
      log_->TrackAbsent(key, prev_primary, lead_from);
    }
  }
  // 3. Make every up member that is not complete equal to this copy: from the PG log when
  // it knows what the member missed, else by comparing whole copies. `through`: every
  // entry logged so far is in this OSD's store (no write of the older interval is between
  // its admission and its append any more), so a sync from here on covers them. Taken
  // once, before the first member that needs a sync (admissions wait while it is taken).
  std::optional<uint64_t> through;
  absl::StatusOr<Listing> local;
  for (int id : members) {
    if (id == self) continue;
    auto c = complete.find(id);
    if (c != complete.end() && c->second) {
      if (log_ != nullptr) log_->MarkInSync(key, id, 0);  // trusted: tracked from now
      continue;
    }
    if (log_ != nullptr && !through.has_value()) {
      absl::MutexLock barrier(&admit_mu_);
      through = log_->Head();
    }
    std::optional<std::vector<std::string>> missed;
    if (log_ != nullptr && as_of[id] > 0) missed = log_->MissedBy(key, id);
    if (missed.has_value()) {
      if (absl::Status s = RecoverFromLog(id, key, *missed); !s.ok()) return s;
    } else {
      if (!local.ok()) local = LocalListing(key, pg_num);
      if (!local.ok()) return local.status();
      if (absl::Status s = PushTo(id, key, pg_num, *local); !s.ok()) return s;
    }
    PgRequest a;
    a.type = kPgActivate;
    a.pool = key.pool;
    a.pg = key.pg;
    a.epoch = epoch;
    if (absl::Status s = ReplyStatus(Call(id, a)); !s.ok()) return s;
    if (log_ != nullptr) log_->MarkInSync(key, id, *through);
  }
  // 4. Active, unless the interval moved on meanwhile (then it is queued again).
  {
    absl::MutexLock l(&mu_);
    PgState& st = pgs_[key];
    if (st.interval != interval || !st.primary) return absl::OkStatus();
    st.complete = true;
    st.as_of = std::max(st.as_of, epoch);
    st.active = true;
    save_pending_ = true;
  }
  // 5. With every member of the acting set up and complete, copies elsewhere are strays
  // (left where the PG was before an out, an in or a new OSD): they go, so moving data
  // frees space. Best effort: one that fails keeps its copy until the next interval.
  const std::vector<int> acting = pm->ActingOfPg(key.pg);
  if (members.size() == acting.size()) {
    for (int id : held) {
      if (std::find(acting.begin(), acting.end(), id) != acting.end()) continue;
      PgRequest r;
      r.type = kPgRemove;
      r.pool = key.pool;
      r.pg = key.pg;
      r.pg_num = pg_num;
      r.epoch = epoch;
      absl::Status s = ReplyStatus(Call(id, r));
      if (!s.ok()) {
        spdlog::info("osd.{}: pg {}: osd.{} keeps its stray copy for now: {}", options_.self,
                     PgName(key.pool, key.pg), id, s.ToString());
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Reply> Peering::CallOne(int osd, const std::function<Message(uint64_t)>& make) {
  auto replies = replicator_->CallAll({osd}, make, options_.call_timeout);
  return std::move(replies.front());
}

absl::StatusOr<Reply> Peering::Call(int osd, const PgRequest& req) {
  return CallOne(osd, [&](uint64_t tid) {
    PgRequest r = req;
    r.tid = tid;
    return Encode(r);
  });
}

absl::StatusOr<uint64_t> Peering::AppendWhole(uint32_t pool, const std::string& oid,
                                               const std::string& data) {
  const std::string name = placement::PoolObjectName(pool, oid);
  iovec iov{const_cast<char*>(data.data()), data.size()};
  return store_->Append(name, 0, &iov, 1, store::PayloadCrc(name, data.data(), data.size()),
                        store::kTruncate);
}

std::vector<std::string> Peering::LocalNames(const PgKey& key, uint32_t pg_num,
                                            std::string_view after, size_t max) const {
  std::vector<std::string> out;
  const std::string prefix = placement::PoolObjectName(key.pool, "");
  CollectPgObjects(key, pg_num, placement::PoolObjectName(key.pool, after), max,
                   [&](const std::string& from) { return store_->List(prefix, from, kNamesPage); },
                   &out);
  return out;
}

absl::StatusOr<Peering::Listing> Peering::Digests(uint32_t pool,
                                                  const std::vector<std::string>& oids) const {
  Listing out;
  for (const std::string& oid : oids) {
    auto data = store_->Read(placement::PoolObjectName(pool, oid));
    if (absl::IsNotFound(data.status())) continue;  // deleted since the listing
    if (!data.ok()) return data.status();
    bytes_digested_.fetch_add(data->size(), std::memory_order_relaxed);
    out[oid] = Entry{data->size(), Crc32c(0, data->data(), data->size())};
  }
  return out;
}

absl::StatusOr<Peering::Listing> Peering::LocalListing(const PgKey& key, uint32_t pg_num) const {
  return Digests(key.pool, LocalNames(key, pg_num, "", SIZE_MAX));
}

absl::StatusOr<Peering::Listing> Peering::RemoteListing(int osd, const PgKey& key,
                                                        uint32_t pg_num) {
  Listing out;
  PgRequest req;
  req.type = kPgList;
  req.pool = key.pool;
  req.pg = key.pg;
  req.pg_num = pg_num;
  for (;;) {
    auto reply = Call(osd, req);
    if (absl::Status s = ReplyStatus(reply); !s.ok()) return s;
    auto body = DecodeListBody(reply->data, /*digest=*/true);
    if (!body.ok()) return body.status();
    for (ListEntry& e : body->entries) out[e.oid] = Entry{e.size, e.crc32c};
    if (!body->more || body->entries.empty()) break;
    req.oid = body->entries.back().oid;
  }
  return out;
}

absl::Status Peering::PullFrom(int osd, const PgKey& key, uint32_t pg_num, bool authoritative) {
  auto remote = RemoteListing(osd, key, pg_num);
  if (!remote.ok()) return remote.status();
  auto local = LocalListing(key, pg_num);
  if (!local.ok()) return local.status();
  std::vector<std::string> wanted, remove;
  std::vector<uint64_t> sizes;
  for (const auto& [oid, e] : *remote) {
    auto mine = local->find(oid);
    if (mine != local->end() &&
        (!authoritative || (mine->second.size == e.size && mine->second.crc == e.crc))) {
      continue;
    }
    wanted.push_back(oid);
    sizes.push_back(e.size);
  }
  for (const auto& [oid, e] : *local) {
    if (authoritative && remote->count(oid) == 0) remove.push_back(oid);
  }
  if (absl::Status s = FetchObjects(osd, key, wanted, sizes, remove); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  ++counters_.backfills;
  return absl::OkStatus();
}

absl::Status Peering::FetchObjects(int osd, const PgKey& key, const std::vector<std::string>& wanted,
                                   const std::vector<uint64_t>& sizes,
                                   const std::vector<std::string>& remove) {
  uint64_t objects = 0, bytes = 0;
  // Reads in flight together (a round trip each would bound a sync by the latency).
  for (size_t first = 0; first < wanted.size();) {
    const size_t n = BatchOf(sizes, first);
    auto replies = replicator_->CallEach(
        std::vector<int>(n, osd),
        [&](size_t i, uint64_t tid) {
          ReadRequest r;
          r.tid = tid;
          r.oid = wanted[first + i];
          r.pool = key.pool;
          return Encode(r);
        },
        options_.call_timeout);
    // A batch's writes share the store's flushes: all appended, then waited for.
    std::vector<uint64_t> tickets;
    for (size_t i = 0; i < n; ++i) {
      absl::Status s = ReplyStatus(replies[i]);
      if (absl::IsNotFound(s)) continue;  // deleted there since its listing
      if (!s.ok()) return s;
      auto ticket = AppendWhole(key.pool, wanted[first + i], replies[i]->data);
      if (!ticket.ok()) return ticket.status();
      tickets.push_back(*ticket);
      ++objects;
      bytes += replies[i]->data.size();
    }
    if (absl::Status s = store_->WaitDurable(tickets); !s.ok()) return s;
    first += n;
  }
  for (const std::string& oid : remove) {
    auto ticket = store_->Delete(placement::PoolObjectName(key.pool, oid));
    if (absl::IsNotFound(ticket.status())) continue;
    if (!ticket.ok()) return ticket.status();
    if (absl::Status s = store_->WaitDurable(*ticket); !s.ok()) return s;
    ++objects;
  }
  absl::MutexLock l(&mu_);
  if (objects > 0) ++counters_.pulls;
  counters_.objects_recovered += objects;
  counters_.bytes_recovered += bytes;
  return absl::OkStatus();
}

std::vector<std::string> Peering::LocalWrittenSince(const PgKey& key, uint32_t pg_num,
                                                    uint64_t since) const {
  std::vector<std::string> out;
  const std::string prefix = placement::PoolObjectName(key.pool, "");
  CollectPgObjects(key, pg_num, prefix, SIZE_MAX,
                   [&](const std::string& from) {
                     return store_->ListWrittenSince(prefix, from, since, kNamesPage);
                   },
                   &out);
  return out;
}

absl::Status Peering::PullFromLog(int osd, const PgKey& key, uint32_t pg_num, uint64_t epoch,
                                  uint64_t as_of) {
  const uint64_t watermark = log_->Watermark(key);
  if (watermark == 0) {
    return absl::FailedPreconditionError(
        "no watermark of this OSD's own writes to the PG (none saved)");
  }
  PgMissedQuery q;
  q.as_of_epoch = as_of;
  q.candidates = LocalWrittenSince(key, pg_num, watermark);
  if (q.candidates.size() > kMaxCandidates) {
    return absl::FailedPreconditionError(absl::StrCat(
        q.candidates.size(), " objects written after its watermark (more than ",
        kMaxCandidates, ")"));
  }
  auto reply = CallOne(osd, [&](uint64_t tid) {
    PgRequest r;
    r.type = kPgMissed;
    r.tid = tid;
    r.pool = key.pool;
    r.pg = key.pg;
    r.pg_num = pg_num;
    r.epoch = epoch;  // the OSD asked catches up to this map first, as for kPgQuery
    r.data = EncodeBody(q);
    return Encode(r);
  });
  if (absl::Status s = ReplyStatus(reply); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("osd.", osd, ": ", s.ToString()));
  }
  auto body = DecodePgMissedBody(reply->data);
  if (!body.ok()) return absl::FailedPreconditionError(body.status().ToString());
  if (!body->known) {
    return absl::FailedPreconditionError(absl::StrCat("osd.", osd, "'s log: ", body->why));
  }
  std::vector<std::string> wanted;
  std::vector<uint64_t> sizes;
  for (ListEntry& e : body->present) {
    wanted.push_back(std::move(e.oid));
    sizes.push_back(e.size);
  }
  // From here on this copy changes: a failure is an error (the peering retries), not a
  // fallback on a half-synced copy that a compare would have to finish anyway.
  if (absl::Status s = FetchObjects(osd, key, wanted, sizes, body->absent); !s.ok()) return s;
  spdlog::info("osd.{}: pg {}: synced from osd.{}'s PG log ({} candidates of its own after "
               "its watermark; {} objects copied, {} deleted if present)",
               options_.self, PgName(key.pool, key.pg), osd, q.candidates.size(), wanted.size(),
               body->absent.size());
  absl::MutexLock l(&mu_);
  ++counters_.pulls_from_log;
  return absl::OkStatus();
}

absl::StatusOr<PgMissedBody> Peering::AnswerMissed(const PgRequest& req, uint64_t sender) {
  if (absl::Status s = CatchUp(req.epoch, sender); !s.ok()) return s;
  if (req.pg_num == 0 || req.pg >= req.pg_num) {
    return absl::InvalidArgumentError("pg missed: pg out of range");
  }
  auto q = DecodePgMissedQuery(req.data);
  if (!q.ok()) return q.status();
  // Only the PG's primary in this OSD's map (which is at least the asker's now) asks.
  if (absl::Status s = CheckPrimaryOfPg(req.pool, req.pg, sender); !s.ok()) return s;
  const PgKey key{req.pool, req.pg};
  PgMissedBody b;
  std::optional<std::vector<std::string>> missed;
  std::string why = "no PG log";
  if (log_ != nullptr) {
    missed = log_->MissedByReturning(key, static_cast<int>(sender), q->as_of_epoch, &why);
  }
  if (!missed.has_value()) {
    b.why = absl::StrCat("osd.", options_.self, " cannot tell what osd.", sender,
                         " missed: ", why);
    return b;
  }
  std::set<std::string> oids(missed->begin(), missed->end());
  oids.insert(q->candidates.begin(), q->candidates.end());
  if (oids.size() > kMaxMissedObjects) {
    b.why = absl::StrCat(oids.size(), " objects to check, more than ", kMaxMissedObjects);
    return b;
  }
  // Sizes from the index: nothing is read here (the asker fetches what it needs).
  for (const std::string& oid : oids) {
    auto size = store_->Stat(placement::PoolObjectName(req.pool, oid));
    if (absl::IsNotFound(size.status())) {
      b.absent.push_back(oid);
    } else if (!size.ok()) {
      return size.status();
    } else {
      b.present.push_back(ListEntry{oid, *size, 0});
    }
  }
  b.known = true;
  spdlog::info("osd.{}: pg {}: told osd.{} what it missed ({} objects by the log, {} "
               "candidates of its own)", options_.self, PgName(req.pool, req.pg), sender,
               missed->size(), q->candidates.size());
  return b;
}

absl::Status Peering::PushTo(int osd, const PgKey& key, uint32_t pg_num, const Listing& local) {
  auto remote = RemoteListing(osd, key, pg_num);
  if (!remote.ok()) return remote.status();
  std::vector<std::string> differ, extra;
  std::vector<uint64_t> sizes;
  for (const auto& [oid, e] : local) {
    auto theirs = remote->find(oid);
    if (theirs != remote->end() && theirs->second.size == e.size && theirs->second.crc == e.crc) {
      continue;
    }
    differ.push_back(oid);
    sizes.push_back(e.size);
  }
  for (const auto& [oid, e] : *remote) {
    if (local.count(oid) == 0) extra.push_back(oid);
  }
  if (absl::Status s = SendObjects(osd, key, differ, sizes, extra, "backfill"); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  ++counters_.backfills;
  return absl::OkStatus();
}

absl::Status Peering::RecoverFromLog(int osd, const PgKey& key,
                                     const std::vector<std::string>& oids) {
  std::vector<std::string> copy, remove;
  std::vector<uint64_t> sizes;
  for (const std::string& oid : oids) {
    auto size = store_->Stat(placement::PoolObjectName(key.pool, oid));
    if (absl::IsNotFound(size.status())) {
      remove.push_back(oid);  // deleted here (or never written): deleted there too
      continue;
    }
    if (!size.ok()) return size.status();
    copy.push_back(oid);
    sizes.push_back(*size);
  }
  if (absl::Status s = SendObjects(osd, key, copy, sizes, remove, "recovery from the PG log");
      !s.ok()) {
    return s;
  }
  absl::MutexLock l(&mu_);
  ++counters_.recoveries_from_log;
  return absl::OkStatus();
}

absl::Status Peering::SendObjects(int osd, const PgKey& key, const std::vector<std::string>& copy,
                                  const std::vector<uint64_t>& sizes,
                                  const std::vector<std::string>& remove, const char* how) {
  uint64_t objects = 0, bytes = 0;
  // Pushes in flight together, each read from the store just before its batch goes.
  for (size_t first = 0; first < copy.size();) {
    const size_t n = BatchOf(sizes, first);
    std::vector<PgRequest> batch;
    for (size_t i = 0; i < n; ++i) {
      auto data = store_->Read(placement::PoolObjectName(key.pool, copy[first + i]));
      if (absl::IsNotFound(data.status())) continue;
      if (!data.ok()) return data.status();
      PgRequest& push = batch.emplace_back();
      push.type = kPgPush;
      push.pool = key.pool;
      push.oid = copy[first + i];
      push.data = std::move(*data);
      bytes += push.data.size();
    }
    auto replies = replicator_->CallEach(
        std::vector<int>(batch.size(), osd),
        [&](size_t i, uint64_t tid) {
          batch[i].tid = tid;
          return Encode(batch[i]);
        },
        options_.call_timeout);
    for (auto& r : replies) {
      if (absl::Status s = ReplyStatus(r); !s.ok()) return s;
    }
    objects += batch.size();
    first += n;
  }
  for (size_t first = 0; first < remove.size();) {
    const size_t n = std::min(remove.size() - first, kBatchObjects);
    auto replies = replicator_->CallEach(
        std::vector<int>(n, osd),
        [&](size_t i, uint64_t tid) {
          ObjectRequest r;
          r.type = kDelete;
          r.tid = tid;
          r.oid = remove[first + i];
          r.pool = key.pool;
          return Encode(r);
        },
        options_.call_timeout);
    for (auto& r : replies) {
      absl::Status s = ReplyStatus(r);
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    objects += n;
    first += n;
  }
  spdlog::info("osd.{}: pg {}: osd.{} synced by {} ({} objects copied or deleted, {} bytes)",
               options_.self, PgName(key.pool, key.pg), osd, how, objects, bytes);
  absl::MutexLock l(&mu_);
  ++counters_.pushes;
  counters_.objects_recovered += objects;
  counters_.bytes_recovered += bytes;
  return absl::OkStatus();
}

Reply Peering::Serve(const PgRequest& req, uint64_t sender) {
  Reply reply;
  reply.tid = req.tid;
  auto fail = [&](const absl::Status& s) {
    reply.code = s.code();
    reply.error = std::string(s.message());
    return reply;
  };
  switch (req.type) {
    case kPgQuery: {
      if (absl::Status s = CatchUp(req.epoch, sender); !s.ok()) return fail(s);
      PgInfoBody b;
      absl::MutexLock l(&mu_);
      auto it = pgs_.find(PgKey{req.pool, req.pg});
      if (it != pgs_.end()) {
        b.complete = it->second.complete;
        b.as_of_epoch = it->second.as_of;
      }
      reply.data = EncodeBody(b);
      return reply;
    }
    case kPgList: {
      if (req.pg_num == 0 || req.pg >= req.pg_num) {
        return fail(absl::InvalidArgumentError("pg list: pg out of range"));
      }
      // Only this page's objects are read (a PG's listing takes several pages). The
      // requester continues after the last entry, so a page whose every object was
      // deleted meanwhile is skipped, not sent empty.
      ListBody body;
      std::string after = req.oid;
      do {
        auto names = LocalNames(PgKey{req.pool, req.pg}, req.pg_num, after, kMaxScrubPage + 1);
        body.more = names.size() > kMaxScrubPage;
        if (body.more) names.pop_back();
        auto page = Digests(req.pool, names);
        if (!page.ok()) return fail(page.status());
        for (auto& [oid, e] : *page) body.entries.push_back(ListEntry{oid, e.size, e.crc});
        if (!names.empty()) after = names.back();
      } while (body.entries.empty() && body.more);
      reply.data = EncodeBody(body, /*digest=*/true);
      return reply;
    }
    case kPgPush: {
      if (req.oid.empty()) return fail(absl::InvalidArgumentError("pg push: no object id"));
      absl::StatusOr<uint64_t> ticket;
      {
        Admission admitted(*this);
        if (absl::Status s = CheckPrimary(req.pool, req.oid, sender); !s.ok()) return fail(s);
        ticket = AppendWhole(req.pool, req.oid, req.data);
      }
      absl::Status s = ticket.ok() ? store_->WaitDurable(*ticket) : ticket.status();
      if (!s.ok()) return fail(s);
      return reply;
    }
    case kPgActivate: {
      if (absl::Status s = CheckPrimaryOfPg(req.pool, req.pg, sender); !s.ok()) return fail(s);
      absl::MutexLock l(&mu_);
      PgState& st = pgs_[PgKey{req.pool, req.pg}];
      st.complete = true;
      st.as_of = std::max(st.as_of, req.epoch);
      save_pending_ = true;
      return reply;
    }
    case kPgMissed: {
      auto body = AnswerMissed(req, sender);
      if (!body.ok()) return fail(body.status());
      reply.data = EncodeBody(*body);
      return reply;
    }
    case kPgRemove: {
      if (absl::Status s = CheckPrimaryOfPg(req.pool, req.pg, sender); !s.ok()) return fail(s);
      auto removed = RemoveStray(PgKey{req.pool, req.pg});
      if (!removed.ok()) return fail(removed.status());
      return reply;
    }
    default:
      return fail(absl::InvalidArgumentError("not a peering request"));
  }
}

absl::Status Peering::CatchUp(uint64_t epoch, uint64_t sender) {
  {
    absl::MutexLock l(&mu_);
    if (epoch <= epoch_) return absl::OkStatus();
    ++counters_.queries_behind_map;
    const uint64_t had = epoch_;
    auto reached = [this, epoch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return epoch_ >= epoch || stop_;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&reached), options_.map_wait) || stop_) {
      return absl::UnavailableError(absl::StrCat(
          "osd.", options_.self, " has map epoch ", epoch_, ", older than osd.", sender,
          "'s ", epoch, "; it answers once it has that map (waited ",
          absl::FormatDuration(options_.map_wait), ")"));
    }
    spdlog::info("osd.{}: caught up from map epoch {} to {} for osd.{}'s query", options_.self,
                 had, epoch_, sender);
  }
  // Every write and delete admitted under the older map is in the store once this returns.
  absl::MutexLock barrier(&admit_mu_);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Peering::RemoveStray(const PgKey& key) {
  const int self = static_cast<int>(options_.self);
  uint32_t pg_num;
  {
    absl::MutexLock l(&mu_);
    auto p = pools_.find(key.pool);
    if (p == pools_.end()) return absl::NotFoundError("pg remove: no such pool in this OSD's map");
    const std::vector<int> acting = p->second->ActingOfPg(key.pg);
    if (std::find(acting.begin(), acting.end(), self) != acting.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pg remove: osd.", self, " is a member of pg ", PgName(key.pool, key.pg),
          " in its map (epoch ", epoch_, ")"));
    }
    pg_num = p->second->pg_num();
  }
  uint64_t n = 0;
  std::vector<uint64_t> tickets;
  for (const std::string& oid : LocalNames(key, pg_num, "", SIZE_MAX)) {
    auto ticket = store_->Delete(placement::PoolObjectName(key.pool, oid));
    if (absl::IsNotFound(ticket.status())) continue;
    if (!ticket.ok()) return ticket.status();
    tickets.push_back(*ticket);
    ++n;
  }
  if (absl::Status s = store_->WaitDurable(tickets); !s.ok()) return s;
  spdlog::log(n > 0 ? spdlog::level::info : spdlog::level::debug,
              "osd.{}: pg {}: stray copy removed ({} objects)", options_.self,
              PgName(key.pool, key.pg), n);
  if (log_ != nullptr) log_->Reset(key);  // a retired log described the copy just dropped
  absl::MutexLock l(&mu_);
  PgState& st = pgs_[key];
  st.complete = false;
  st.as_of = 0;  // nothing left to offer
  save_pending_ = true;
  ++counters_.strays_removed;
  counters_.stray_objects_removed += n;
  return n;
}

PeeringCounters Peering::counters() const {
  absl::ReaderMutexLock l(&mu_);
  PeeringCounters c = counters_;
  c.bytes_digested = bytes_digested_.load(std::memory_order_relaxed);
  if (log_ != nullptr) {
    const PgLog::Stats ls = log_->stats();
    c.pg_log_entries = ls.entries;
    c.pg_log_trimmed = ls.trimmed;
  }
  for (const auto& [key, st] : pgs_) {
    if (!st.primary) continue;
    ++(st.active ? c.pgs_active : c.pgs_peering);
  }
  return c;
}

}  // namespace msgr::osd
