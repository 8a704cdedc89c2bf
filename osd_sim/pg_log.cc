#include "osd_sim/pg_log.h"

#include <algorithm>
#include <utility>

namespace msgr::osd {
namespace {

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

PgLog::PgLog(size_t max_entries) : max_entries_(max_entries) {}

PgLog::Ticket PgLog::Append(const PgId& pg, std::string_view oid,
                            const std::vector<int>& targets) {
  if (max_entries_ == 0) return Ticket();
  absl::MutexLock l(&mu_);
  const uint64_t pos = ++head_;
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

void PgLog::Reset(const PgId& pg) {
  absl::MutexLock l(&mu_);
  auto it = pgs_.find(pg);
  if (it == pgs_.end()) return;
  entries_ -= it->second.by_pos.size();
  pgs_.erase(it);
}

void PgLog::MarkInSync(const PgId& pg, int osd, uint64_t through) {
  if (max_entries_ == 0) return;
  absl::MutexLock l(&mu_);
  Member& m = pgs_[pg].members[osd];
  m.tracked = true;
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
  if (p == pgs_.end()) return std::nullopt;
  auto m = p->second.members.find(osd);
  if (m == p->second.members.end() || !m->second.tracked || m->second.overflowed) {
    return std::nullopt;
  }
  uint64_t frontier = head_;
  if (!m->second.marks.empty()) frontier = m->second.marks.begin()->first - 1;
  if (m->second.missed_trimmed > 0) frontier = std::min(frontier, m->second.missed_trimmed - 1);
  if (frontier < p->second.trimmed_through) return std::nullopt;
  std::vector<std::string> out;
  for (auto e = p->second.by_pos.upper_bound(frontier); e != p->second.by_pos.end(); ++e) {
    out.push_back(e->second);
  }
  return out;
}

PgLog::Stats PgLog::stats() const {
  absl::MutexLock l(&mu_);
  return Stats{entries_, trimmed_};
}

void PgLog::Resolve(const PgId& pg, uint64_t pos, int osd, bool ok) {
  absl::MutexLock l(&mu_);
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
  auto p = pgs_.find(pg);
  if (p == pgs_.end()) return;
  for (auto& [id, m] : p->second.members) {
    auto mk = m.marks.find(pos);
    if (mk != m.marks.end()) mk->second = true;
  }
}

void PgLog::Diverge(const PgId& pg, uint64_t pos) {
  absl::MutexLock l(&mu_);
  auto p = pgs_.find(pg);
  if (p == pgs_.end()) return;
  for (auto& [id, m] : p->second.members) m.marks[pos] = true;
}

}  // namespace msgr::osd
