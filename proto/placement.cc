#include "proto/placement.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>

namespace msgr::placement {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// splitmix64's finalizer: a bijection with good avalanche.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Straw2 score of `osd` for pg (`pool_id`, `pg`): ln(u) / weight, u uniform in (0, 1].
// Pool 0 draws as before pools existed, so existing clusters keep their placement.
double Straw2Score(uint32_t pg, const OsdEntry& osd, uint32_t pool_id) {
  const uint64_t pool_salt = pool_id == 0 ? 0 : Mix64(0x9001ull << 32 | pool_id);
  uint64_t h = Mix64(Mix64((uint64_t{pg} << 32) | osd.id) ^ 0x5eed5eed5eed5eedull ^ pool_salt);
  // 53 random bits -> u in (0, 1]; never 0 so the log is finite.
  double u = (static_cast<double>(h >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  return std::log(u) / osd.weight;
}

}  // namespace

uint64_t StableHash64(std::string_view data) {
  uint64_t h = kFnvOffset;
  for (unsigned char c : data) {
    h ^= c;
    h *= kFnvPrime;
  }
  return Mix64(h ^ data.size());
}

uint32_t ObjectToPg(std::string_view oid, uint32_t pg_num) {
  assert(pg_num > 0);
  return static_cast<uint32_t>(StableHash64(oid) % pg_num);
}

int PgToOsd(uint32_t pg, const std::vector<OsdEntry>& osds, uint32_t pool_id) {
  int best = kNoOsd;
  double best_score = -std::numeric_limits<double>::infinity();
  for (const OsdEntry& o : osds) {
    if (!o.in || !(o.weight > 0)) continue;
    double s = Straw2Score(pg, o, pool_id);
    // Ties (practically impossible) go to the lower id so the choice stays deterministic.
    if (best == kNoOsd || s > best_score ||
        (s == best_score && static_cast<int>(o.id) < best)) {
      best = static_cast<int>(o.id);
      best_score = s;
    }
  }
  return best;
}

std::vector<int> PgToOsds(uint32_t pg, const std::vector<OsdEntry>& osds, uint32_t size,
                          uint32_t pool_id) {
  if (size <= 1) {
    const int only = PgToOsd(pg, osds, pool_id);
    return only == kNoOsd ? std::vector<int>{} : std::vector<int>{only};
  }
  // Every candidate ranked by its straw2 score, best first (ties: lower id first).
  std::vector<std::pair<double, const OsdEntry*>> ranked;
  for (const OsdEntry& o : osds) {
    if (o.in && o.weight > 0) ranked.emplace_back(Straw2Score(pg, o, pool_id), &o);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second->id < b.second->id;
  });
  std::vector<int> acting;
  std::vector<bool> taken(ranked.size(), false);
  std::set<std::string> hosts;
  // One per host first, then (fewer hosts than copies) the best of the rest.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ranked.size() && acting.size() < size; ++i) {
      if (taken[i]) continue;
      const std::string& host = ranked[i].second->host;
      if (pass == 0 && !host.empty() && !hosts.insert(host).second) continue;
      taken[i] = true;
      acting.push_back(static_cast<int>(ranked[i].second->id));
    }
  }
  return acting;
}

std::string PoolObjectName(uint32_t pool_id, std::string_view oid) {
  if (pool_id == kDefaultPoolId) return std::string(oid);
  std::string name;
  name.reserve(oid.size() + 12);
  name += kPoolNameMark;
  name += std::to_string(pool_id);
  name += kPoolNameMark;
  name += oid;
  return name;
}

size_t PoolNameOverhead(uint32_t pool_id) {
  return pool_id == kDefaultPoolId ? 0 : std::to_string(pool_id).size() + 2;
}

bool SplitPoolObjectName(std::string_view name, uint32_t* pool_id, std::string_view* oid) {
  if (name.empty() || name[0] != kPoolNameMark) {
    *pool_id = kDefaultPoolId;
    *oid = name;
    return true;
  }
  const size_t end = name.find(kPoolNameMark, 1);
  if (end == std::string_view::npos || end == 1 || end > 11) return false;
  if (name[1] == '0') return false;  // one spelling per pool: "\x017\x01", never "\x01007\x01"
  uint64_t id = 0;
  for (size_t i = 1; i < end; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    id = id * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  if (id == 0 || id > UINT32_MAX) return false;
  *pool_id = static_cast<uint32_t>(id);
  *oid = name.substr(end + 1);
  return true;
}

PlacementMap PlacementMap::Build(uint64_t epoch, uint32_t pg_num, std::vector<OsdEntry> osds,
                                 PoolSize pool, uint32_t pool_id) {
  assert(pg_num > 0);
  assert(pool.min_size >= 1 && pool.min_size <= pool.size);
  PlacementMap m;
  m.epoch_ = epoch;
  m.pg_num_ = pg_num;
  m.pool_ = pool;
  m.pool_id_ = pool_id;
  m.osds_ = std::move(osds);
  m.acting_.resize(pg_num);
  m.primary_.assign(pg_num, kNoOsd);
  for (uint32_t pg = 0; pg < pg_num; ++pg) {
    m.acting_[pg] = PgToOsds(pg, m.osds_, pool.size, pool_id);
    const std::vector<int>& acting = m.acting_[pg];
    if (acting.empty()) continue;
    m.primary_[pg] = acting.front();
    for (int id : acting) {
      const OsdEntry* o = m.Find(id);
      if (o != nullptr && o->up) {
        m.primary_[pg] = id;
        break;
      }
    }
  }
  return m;
}

const std::vector<int>& PlacementMap::ActingOfPg(uint32_t pg) const {
  static const std::vector<int> kNone;
  return pg < acting_.size() ? acting_[pg] : kNone;
}

const OsdEntry* PlacementMap::Find(int id) const {
  for (const OsdEntry& o : osds_) {
    if (static_cast<int>(o.id) == id) return &o;
  }
  return nullptr;
}

}  // namespace msgr::placement
