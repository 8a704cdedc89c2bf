#include "osd_sim/pg_log.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace msgr::osd {
namespace {

// "The log cannot tell", with the reason in `*why` (if given).
std::optional<std::vector<std::string>> Unknown(std::string_view reason, std::string* why) {
  if (why != nullptr) *why = std::string(reason);
  return std::nullopt;
}

// A PG keeps at least this many entries however many PGs share the budget.
constexpr size_t kMinEntriesPerPg = 64;
// A member with more marks than this in one PG (one gone for long: a mark per write it
// misses) is no longer followed: it is backfilled when it comes back.
constexpr size_t kMaxMarksPerMember = 4096;

}  // namespace

PgLog::Ticket& PgLog::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    if (log_ != nullptr) log_->Abandon(pg_, pos_);
    log_ = std::exchange(o.log_, nullptr);
    pg_ = o.pg_;
    pos_ = std::exchange(o.pos_, 0);
  }
  return *this;
}

PgLog::Ticket::~Ticket() {
  if (log_ != nullptr) log_->Abandon(pg_, pos_);
}

void PgLog::Ticket::Resolved(int osd, bool ok) const {
  if (log_ != nullptr) log_->Resolve(pg_, pos_, osd, ok);
}

void PgLog::Ticket::Diverged() const {
  if (log_ != nullptr) log_->Diverge(pg_, pos_);
}

void PgLog::Ticket::LocalDone() const {
  if (log_ != nullptr) log_->LocalDone(pos_);
}

PgLog::PgLog(size_t max_entries) : max_entries_(max_entries) {}

PgLog::Ticket PgLog::Append(const PgId& pg, std::string_view oid,
                            const std::vector<int>& targets, std::optional<uint64_t> low_in) {
  if (max_entries_ == 0) return Ticket();
  // Read before the write reaches the local store (the caller stores it after this
  // returns): a lower bound of its seq there, taken outside the leaf lock.
  const uint64_t low = low_in ? *low_in : SeqNow();
  absl::MutexLock l(&mu_);
  const uint64_t pos = ++head_;
  written_[pg].unsettled.insert(low);
  InFlight& f = in_flight_[pos];
  f.pg = pg;
  f.low = low;
  f.pending = targets;
  Pg& p = pgs_[pg];
  auto [it, fresh] = p.by_oid.try_emplace(std::string(oid), pos);
  if (fresh) {
    ++entries_;
  } else {
    p.by_pos.erase(it->second);  // the object's newer entry stands for both
    it->second = pos;
  }
  p.by_pos.emplace(pos, it->first);
  for (int t : targets) p.members[t].marks.emplace(pos, /*missed=*/false);
  for (auto& [id, m] : p.members) {
    if (m.tracked && std::find(targets.begin(), targets.end(), id) == targets.end()) {
      m.marks.emplace(pos, /*missed=*/true);  // not sent a copy
    }
    if (m.marks.size() > kMaxMarksPerMember) {
      // Bounded memory: what it missed is no longer known (until a sync as of a point).
      for (auto mk = m.marks.begin(); mk != m.marks.end();) {
        mk = mk->second ? m.marks.erase(mk) : std::next(mk);
      }
      m.missed_trimmed = 0;
      m.overflowed = true;
    }
  }
  const size_t share = std::max(kMinEntriesPerPg, max_entries_ / pgs_.size());
  const uint64_t trimmed_before = p.trimmed_through;
  while (p.by_pos.size() > share) {
    auto first = p.by_pos.begin();
    p.trimmed_through = first->first;
    p.by_oid.erase(first->second);
    p.by_pos.erase(first);
    --entries_;
    ++trimmed_;
  }
  // Missed marks behind the trim point say no more than "compare whole copies": keep one
  // number instead (outstanding ones stay until their copies report). Only when this
  // append trimmed: not a walk of every member's marks per write.
  if (p.trimmed_through != trimmed_before) {
    for (auto& [id, m] : p.members) {
      for (auto mk = m.marks.begin(); mk != m.marks.end() && mk->first <= p.trimmed_through;) {
        if (!mk->second) {
          ++mk;
          continue;
        }
        m.missed_trimmed = std::max(m.missed_trimmed, mk->first);
        mk = m.marks.erase(mk);
      }
    }
  }
  return Ticket(this, pg, pos);
}

uint64_t PgLog::Head() const {
  absl::MutexLock l(&mu_);
  return head_;
}

void PgLog::EraseLocked(std::map<PgId, Pg>::iterator it) {
  entries_ -= it->second.by_pos.size();
  if (it->second.retired) retired_.fetch_sub(1, std::memory_order_relaxed);
  pgs_.erase(it);
}

void PgLog::Reset(const PgId& pg) {
  absl::MutexLock l(&mu_);
  auto it = pgs_.find(pg);
  if (it != pgs_.end()) EraseLocked(it);
}

void PgLog::Retire(const PgId& pg) {
  absl::MutexLock l(&mu_);
  auto it = pgs_.find(pg);
  if (it == pgs_.end() || it->second.retired) return;
  it->second.retired = true;
  retired_.fetch_add(1, std::memory_order_relaxed);
}

void PgLog::CopyChanged(const PgId& pg) {
  if (retired_.load(std::memory_order_relaxed) == 0) return;  // every replica write asks
  absl::MutexLock l(&mu_);
  auto it = pgs_.find(pg);
  if (it != pgs_.end() && it->second.retired) EraseLocked(it);
}

bool PgLog::TrackAbsent(const PgId& pg, int osd, uint64_t since_epoch) {
  if (max_entries_ == 0) return false;
  absl::MutexLock l(&mu_);
  Pg& p = pgs_[pg];
  // Entries before the member's tracking began would not be marked for it.
  if (!p.by_pos.empty() || p.trimmed_through > 0 || p.retired) return false;
  Member& m = p.members[osd];
  if (m.tracked) return false;
  m.tracked = true;
  m.since_epoch = since_epoch;
  return true;
}

void PgLog::MarkInSync(const PgId& pg, int osd, uint64_t through) {
  if (max_entries_ == 0) return;
  absl::MutexLock l(&mu_);
  Member& m = pgs_[pg].members[osd];
  m.tracked = true;
  m.since_epoch = 0;  // synced or trusted complete: its copy is this one's now
  if (through > 0) m.overflowed = false;
  for (auto mk = m.marks.begin(); mk != m.marks.end() && mk->first <= through;) {
    mk = mk->second ? m.marks.erase(mk) : std::next(mk);
  }
  if (m.missed_trimmed <= through) m.missed_trimmed = 0;
}

std::optional<std::vector<std::string>> PgLog::MissedBy(const PgId& pg, int osd) const {
  if (max_entries_ == 0) return std::nullopt;
  absl::MutexLock l(&mu_);
  auto p = pgs_.find(pg);
  if (p == pgs_.end() || p->second.retired) return std::nullopt;
  auto m = p->second.members.find(osd);
  if (m == p->second.members.end() || m->second.since_epoch > 0) return std::nullopt;
  return MissedLocked(p->second, m->second);
}

std::optional<std::vector<std::string>> PgLog::MissedByReturning(const PgId& pg, int osd,
                                                                 uint64_t as_of,
                                                                 std::string* why) const {
  if (max_entries_ == 0) return Unknown("no PG log", why);
  absl::MutexLock l(&mu_);
  auto p = pgs_.find(pg);
  if (p == pgs_.end()) return Unknown("no log of the PG (its copy changed since it led it)", why);
  if (!p->second.retired) return Unknown("it still leads the PG", why);
  auto m = p->second.members.find(osd);
  if (m == p->second.members.end()) return Unknown("the member is not tracked", why);
  // Tracked from the log's start: its copy must have been complete up to the map before
  // this OSD started to lead (header comment).
  if (m->second.since_epoch > 0 && as_of + 1 < m->second.since_epoch) {
    return Unknown(absl::StrCat("the member's copy is complete as of epoch ", as_of,
                                ", the log starts at epoch ", m->second.since_epoch), why);
  }
  return MissedLocked(p->second, m->second, why);
}

std::optional<std::vector<std::string>> PgLog::MissedLocked(const Pg& p, const Member& m,
                                                            std::string* why) const {
  if (!m.tracked) return Unknown("the member is not tracked", why);
  if (m.overflowed) return Unknown("the member missed too many writes to follow", why);
  uint64_t frontier = head_;
  if (!m.marks.empty()) frontier = m.marks.begin()->first - 1;
  if (m.missed_trimmed > 0) frontier = std::min(frontier, m.missed_trimmed - 1);
  if (frontier < p.trimmed_through) return Unknown("entries it missed were trimmed", why);
  std::vector<std::string> out;
  for (auto e = p.by_pos.upper_bound(frontier); e != p.by_pos.end(); ++e) {
    out.push_back(e->second);
  }
  return out;
}

void PgLog::SetSequenceSource(std::function<uint64_t()> next_seq) {
  next_seq_ = std::move(next_seq);
}

uint64_t PgLog::Watermark(const PgId& pg) const {
  if (max_entries_ == 0 || !next_seq_) return 0;
  // Read first: a write logged after this read has a lower bound at least this high, one
  // logged before is in `unsettled` (or settled) once the lock is taken.
  uint64_t w = next_seq_();
  absl::MutexLock l(&mu_);
  auto it = written_.find(pg);
  if (it == written_.end()) return w;
  w = std::min(w, it->second.pin);
  if (!it->second.unsettled.empty()) w = std::min(w, *it->second.unsettled.begin());
  return w;
}

void PgLog::RestoreWatermark(const PgId& pg, uint64_t seq) {
  absl::MutexLock l(&mu_);
  Written& w = written_[pg];
  w.pin = std::min(w.pin, seq);
}

void PgLog::Resynced(const PgId& pg) {
  absl::MutexLock l(&mu_);
  written_.erase(pg);
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    it = it->second.pg == pg ? in_flight_.erase(it) : std::next(it);
  }
}

void PgLog::SettleLocked(std::map<uint64_t, InFlight>::iterator it, bool ok) {
  Written& w = written_[it->second.pg];
  if (auto u = w.unsettled.find(it->second.low); u != w.unsettled.end()) w.unsettled.erase(u);
  if (!ok) w.pin = std::min(w.pin, it->second.low);
  in_flight_.erase(it);
}

void PgLog::LocalDone(uint64_t pos) {
  absl::MutexLock l(&mu_);
  auto f = in_flight_.find(pos);
  if (f == in_flight_.end()) return;
  f->second.local_pending = false;
  if (f->second.pending.empty()) SettleLocked(f, /*ok=*/true);
}

PgLog::Stats PgLog::stats() const {
  absl::MutexLock l(&mu_);
  return Stats{entries_, trimmed_};
}

void PgLog::Resolve(const PgId& pg, uint64_t pos, int osd, bool ok) {
  absl::MutexLock l(&mu_);
  if (auto f = in_flight_.find(pos); f != in_flight_.end()) {
    std::vector<int>& pending = f->second.pending;
    auto it = std::find(pending.begin(), pending.end(), osd);
    if (it != pending.end()) {
      pending.erase(it);
      if (!ok) {
        SettleLocked(f, /*ok=*/false);
      } else if (pending.empty() && !f->second.local_pending) {
        SettleLocked(f, /*ok=*/true);
      }
    }
  }
  auto p = pgs_.find(pg);
  if (p == pgs_.end()) return;
  auto m = p->second.members.find(osd);
  if (m == p->second.members.end()) return;
  auto mk = m->second.marks.find(pos);
  if (mk == m->second.marks.end() || mk->second) return;  // unknown, or already missed
  if (ok) {
    m->second.marks.erase(mk);
  } else {
    mk->second = true;
  }
}

void PgLog::Abandon(const PgId& pg, uint64_t pos) {
  absl::MutexLock l(&mu_);
  // Dropped before every member answered: it may be anywhere. Without members left to
  // answer (none were sent a copy, or all took it), no member can hold a version this copy
  // lacks: settled.
  if (auto f = in_flight_.find(pos); f != in_flight_.end()) {
    SettleLocked(f, /*ok=*/f->second.pending.empty());
  }
  auto p = pgs_.find(pg);
  if (p == pgs_.end()) return;
  for (auto& [id, m] : p->second.members) {
    auto mk = m.marks.find(pos);
    if (mk != m.marks.end()) mk->second = true;
  }
}

void PgLog::Diverge(const PgId& pg, uint64_t pos) {
  absl::MutexLock l(&mu_);
  if (auto f = in_flight_.find(pos); f != in_flight_.end()) SettleLocked(f, /*ok=*/false);
  auto p = pgs_.find(pg);
  if (p == pgs_.end()) return;
  for (auto& [id, m] : p->second.members) m.marks[pos] = true;
}

}  // namespace msgr::osd
