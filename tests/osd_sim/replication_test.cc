// Replication end to end, in one process: a monitor with a size-3 pool, four OSDs, the
// client library. Writes land on every member of their PG's acting set; with one member
// down every acknowledged object still reads back and writes go on; with two down a PG
// below min_size refuses writes (the client retries until its op timeout).
#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <utility>
#include <set>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/mon/mon_server.h"
#include "osd_sim/osd.h"
#include "proto/cluster_map.h"
#include "tests/osd_sim/wait_active.h"

namespace msgr::osd {
namespace {

constexpr int kOsds = 4;
const AuthConfig kAuth{AuthConfig::Mode::kSecret, "replication-test-secret"};

std::string TempDir(const std::string& name) {
  static int n = 0;
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name, ".", getpid(), ".", n++);
  std::string cmd = "mkdir -p " + dir;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

// Distinct contents per object and version, several records for the large ones.
std::string Contents(int i, int version, size_t size) {
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>((i * 131 + version * 7 + k) % 251);
  return s;
}

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mon::MonServerOptions mo;
    mo.monitor.data_dir = TempDir("mon");
    mo.monitor.grace = absl::Milliseconds(600);
    mo.monitor.heartbeat_interval = absl::Milliseconds(100);
    mo.monitor.pg_num = 32;
    mo.monitor.pool_size = 3;
    mo.monitor.pool_min_size = 2;
    auto mon = mon::MonServer::Create(mo);
    ASSERT_TRUE(mon.ok()) << mon.status();
    mon_ = std::move(*mon);
    osds_.resize(kOsds);
    for (int i = 0; i < kOsds; ++i) StartOsd(i);
    WaitActive(32);
    client::ClientOptions co;
    co.mon_addr = mon_->addr();
    co.auth = kAuth;
    co.op_timeout = absl::Seconds(3);
    co.max_record_payload = 64 << 10;  // large objects go as several records
    auto c = client::Client::Create(co);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    ASSERT_TRUE(client_->ConnectAll(absl::Now() + absl::Seconds(10)).ok());
  }
  void TearDown() override {
    Hold({});
    client_.reset();
    for (auto& o : osds_) o.reset();
    mon_.reset();
  }

  void StartOsd(int id) {
    OsdOptions o;
    o.id = static_cast<uint32_t>(id);
    o.mon_addr = mon_->addr();
    // A durable OSD keeps its directory across restarts (its copies go stale while down).
    if (durable_.count(id) != 0) {
      if (data_dirs_[id].empty()) data_dirs_[id] = TempDir(absl::StrCat("osd", id));
      o.data_dir = data_dirs_[id];
      o.durability = store::Durability::kDurable;
    } else {
      o.data_dir = TempDir(absl::StrCat("osd", id));
      o.durability = store::Durability::kMemory;
    }
    o.capacity_bytes = 256 << 20;
    o.ring_bytes = 1 << 20;
    o.host_name = "one-host";
    o.auth = kAuth;
    // refuse_[id]: the store's completions of this OSD report an error (the OSD stays up).
    o.durable_hook = [this, id](PersistCallback done) -> PersistCallback {
      if (!refuse_[id].load()) return done;
      return [done = std::move(done)](absl::Status) mutable {
        done(absl::InternalError("injected: the store refused the write"));
      };
    };
    o.delete_hook = [this, id] {
      return refuse_[id].load() ? absl::InternalError("injected: the store refused the delete")
                                : absl::OkStatus();
    };
    // held_: this OSD stays on its older map until the test lets it go.
    o.map_hook = [this, id](uint64_t epoch) {
      WaitUnheld(id);
      seen_epoch_[id] = epoch;
    };
    if (cluster_type_ == "rdma") {
      o.ms_types = {"tcp", "rdma"};  // clients over tcp, replicas over rdma
      o.cluster_ms_type = "rdma";
      o.backend_options["rdma_device"] = "soft";
      // Forwards of 16 KiB and up are sent from the client's ring, not staged (the
      // default, 256 KiB, is above every record of these writes: the client splits a
      // 300 KiB object into records that fit the small ring a session starts with).
      o.backend_options["rdma_zero_copy_min_bytes"] = std::to_string(kZeroCopyMinBytes);
    }
    auto osd = Osd::Start(o);
    ASSERT_TRUE(osd.ok()) << osd.status();
    osds_[id] = std::move(*osd);
  }

  static constexpr size_t kZeroCopyMinBytes = 16 << 10;
  nlohmann::json Perf(int id) { return nlohmann::json::parse(osds_[id]->PerfDumpJson()); }
  // An rdma counter (messenger.rdma.rdma.NAME), summed over the running OSDs.
  uint64_t SumRdma(const char* counter) {
    uint64_t n = 0;
    for (int id = 0; id < kOsds; ++id) {
      if (osds_[id] != nullptr) n += Perf(id)["messenger"]["rdma"]["rdma"][counter].get<uint64_t>();
    }
    return n;
  }
  // A messenger counter of one backend, summed over the running OSDs' perf dumps.
  uint64_t Sum(const char* backend, const char* counter) {
    uint64_t n = 0;
    for (int id = 0; id < kOsds; ++id) {
      if (osds_[id] != nullptr) n += Perf(id)["messenger"][backend][counter].get<uint64_t>();
    }
    return n;
  }
  // Waits until the running OSDs lead `pgs` active PGs, none peering (wait_active.h).
  void WaitActive(uint64_t pgs) {
    const absl::Status s =
        osd::testing::WaitPgsActive(mon_->addr(), osds_, seen_epoch_.data(), pgs);
    if (!s.ok()) FAIL() << s;
  }
  uint64_t Objects(int id) { return Perf(id)["store"]["objects"].get<uint64_t>(); }
  // Client and replica records stored, all OSDs. Pollers publish their counters after a
  // pass, which may end after the ack went out (and a poller that does not run for a while
  // publishes nothing: two dumps in a row can agree and both be old): read until the
  // pollers have counted every record the OSDs' messengers received (their live counters,
  // counted before the poller sees a record (tcp) or as it releases it (rdma)), at most 5 s.
  // After WriteObjects(0, 40, ...), one write at a time: every record is forwarded
  // exactly once, by the primary's poller itself or by the peer's sender thread. The
  // records are all small enough to go inline (the client splits the 300 KiB objects into
  // records that fit the small rings a session starts with); a 300 KiB object's later
  // parts may find a ring full and go to the sender thread, but each of the 32 small
  // objects comes after the write before it was acknowledged by every replica, so it
  // finds each peer's queue empty and its ring with room: at least 2 x 32 inline.
  void ExpectForwardedInlineMostly(uint64_t replica_records) {
    uint64_t inline_sent = 0, inline_deferred = 0, forwarded = 0;
    for (int id = 0; id < kOsds; ++id) {
      const nlohmann::json r = Perf(id)["replication"];
      inline_sent += r["inline_forwards"].get<uint64_t>();
      inline_deferred += r["inline_forwards_deferred"].get<uint64_t>();
      forwarded += r["records_forwarded"].get<uint64_t>();
    }
    EXPECT_EQ(forwarded, replica_records);
    EXPECT_LE(inline_sent, forwarded);
    EXPECT_GE(inline_sent, 2u * 32) << inline_deferred << " deferred to the sender threads";
  }
  void RecordCounts(uint64_t* client_records, uint64_t* replica_records) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      uint64_t c = 0, r = 0, received = 0;
      for (int id = 0; id < kOsds; ++id) {
        if (osds_[id] == nullptr) continue;
        const nlohmann::json d = Perf(id);
        c += d["osd"]["ops"].get<uint64_t>();
        r += d["osd"]["replica_ops"].get<uint64_t>();
        for (const auto& [backend, m] : d["messenger"].items()) {
          received += m["records_received"].get<uint64_t>();
        }
      }
      *client_records = c;
      *replica_records = r;
      if (c + r == received) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  // Pool "single" (size 1, 16 PGs) beside the default pool, active; and the options of a
  // client of it.
  void CreateSinglePool(mon::MonClient& mc) {
    mon::v1::CreatePoolRequest req;
    req.set_name("single");
    req.set_size(1);
    req.set_pg_num(16);
    ASSERT_TRUE(mc.CreatePool(req).ok());
    WaitActive(32 + 16);
  }
  client::ClientOptions SinglePoolClientOptions() const {
    client::ClientOptions co;
    co.mon_addr = mon_->addr();
    co.auth = kAuth;
    co.op_timeout = absl::Seconds(10);
    co.pool = "single";
    return co;
  }

  // Waits until the monitor's map says osd `id` is up == `up`.
  void WaitUp(int id, bool up) {
    auto mc = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
    ASSERT_TRUE(mc.ok());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      auto map = (*mc)->GetMap();
      ASSERT_TRUE(map.ok());
      for (const auto& o : map->osds()) {
        if (static_cast<int>(o.id()) == id && o.up() == up) {
          absl::SleepFor(absl::Milliseconds(300));  // the OSDs and the client follow it
          return;
        }
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << "osd." << id << " never became " << (up ? "up" : "down");
  }

  // The syncs from PG logs the monitor last heard of from osd `id` (its heartbeats' PG
  // stats: monctl status), once at least `want` (up to 10 s), else the last seen.
  uint64_t MonitorLogSyncs(int id, uint64_t want) {
    auto mc = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
    if (!mc.ok()) return 0;
    uint64_t seen = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      auto map = (*mc)->GetMap();
      if (map.ok()) {
        auto it = map->osd_pg_stats().find(static_cast<uint32_t>(id));
        if (it != map->osd_pg_stats().end()) seen = it->second.recoveries_from_log();
      }
      if (seen >= want) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return seen;
  }

  placement::PlacementMap Map() {
    auto mc = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
    return placement::ToPlacementMap(*(*mc)->GetMap(), "tcp");
  }

  // Writes objects [first, first + n); every 5th is 300 KiB (five records).
  void WriteObjects(int first, int n, int version) {
    for (int i = first; i < first + n; ++i) {
      const size_t size = i % 5 == 0 ? 300 << 10 : 4096 + i;
      ASSERT_TRUE(client_->Write(absl::StrCat("obj.", i), Contents(i, version, size)).ok())
          << "obj." << i;
    }
  }
  void ExpectObjects(int first, int n, int version) {
    for (int i = first; i < first + n; ++i) {
      const size_t size = i % 5 == 0 ? 300 << 10 : 4096 + i;
      auto got = client_->Read(absl::StrCat("obj.", i));
      ASSERT_TRUE(got.ok()) << "obj." << i << ": " << got.status();
      EXPECT_TRUE(*got == Contents(i, version, size)) << "obj." << i << " differs";
    }
  }

  // The OSD-to-OSD sessions' backend (OsdOptions::cluster_ms_type).
  std::string cluster_type_ = "tcp";
  std::set<int> durable_;                 // OSDs with a durable store (others: memory)
  std::map<int, std::string> data_dirs_;  // their directories
  // Deletes objects [first, first + n).
  void DeleteObjects(int first, int n) {
    for (int i = first; i < first + n; ++i) {
      ASSERT_TRUE(client_->Delete(absl::StrCat("obj.", i)).ok()) << "obj." << i;
    }
  }
  // osd.0 again, with a durable store (it keeps its copies over a restart); every PG active.
  void RestartOsd0Durable() {
    durable_ = {0};
    osds_[0].reset();
    StartOsd(0);
    WaitUp(0, true);
    WaitActive(32);
  }
  // Every replica holds what its primary does (msgr scrub).
  void ExpectScrubClean() {
    auto scrub = client_->Scrub();
    ASSERT_TRUE(scrub.ok()) << scrub.status();
    EXPECT_TRUE(scrub->clean()) << scrub->problems.size() << " problems, first: "
                                << (scrub->problems.empty() ? "" : scrub->problems.front());
  }
  // Version 1 of objects 0..39 everywhere, then osd.0 stopped (a durable one keeps its
  // copies) while 0..19 get version 2 and 20..29 are deleted.
  void MissWritesOnOsd0() {
    WriteObjects(0, 40, 1);
    osds_[0].reset();
    WaitUp(0, false);
    WriteObjects(0, 20, 2);
    DeleteObjects(20, 10);
  }
  // After MissWritesOnOsd0 (objects [0, n), n >= 40) and osd.0's return: each OSD holds
  // exactly the live objects whose acting set names it, and with osd.1 and osd.2 stopped
  // (osd.0 then serves every PG it is in) 0..19 read back at version 2, 20..29 are gone,
  // 30..39 are at version 1.
  void ExpectPlacedAndNewestWithOthersDown(int n) {
    const placement::PlacementMap map = Map();
    for (int id = 0; id < kOsds; ++id) {
      uint64_t expected = 0;
      for (int i = 0; i < n; ++i) {
        if (i >= 20 && i < 30) continue;
        const auto& acting = map.ActingOfPg(map.PgOf(absl::StrCat("obj.", i)));
        expected += std::count(acting.begin(), acting.end(), id);
      }
      EXPECT_EQ(Objects(id), expected) << "osd." << id;
    }
    osds_[1].reset();
    osds_[2].reset();
    WaitUp(1, false);
    WaitUp(2, false);
    ExpectObjects(0, 20, 2);
    ExpectDeleted(20, 10);
    ExpectObjects(30, 10, 1);
  }
  void ExpectDeleted(int first, int n) {
    for (int i = first; i < first + n; ++i) {
      EXPECT_TRUE(absl::IsNotFound(client_->Read(absl::StrCat("obj.", i)).status())) << "obj." << i;
    }
  }
  std::array<std::atomic<bool>, kOsds> refuse_{};
  // The newest map epoch each OSD was handed (its map_hook), for WaitActive.
  std::array<std::atomic<uint64_t>, kOsds> seen_epoch_{};
  // Holding maps back: an OSD (by id) or a client (by kHeldClient) in held_ does not apply
  // a new map until it is taken out.
  static constexpr int kHeldClient = -1;
  void WaitUnheld(int who) {
    absl::MutexLock l(&held_mu_);
    auto free = [this, who]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(held_mu_) {
      return held_.count(who) == 0;
    };
    held_mu_.Await(absl::Condition(&free));
  }
  void Hold(std::set<int> who) {
    absl::MutexLock l(&held_mu_);
    held_ = std::move(who);
  }
  absl::Mutex held_mu_;
  std::set<int> held_ ABSL_GUARDED_BY(held_mu_);
  std::unique_ptr<mon::MonServer> mon_;
  std::vector<std::unique_ptr<Osd>> osds_;
  std::unique_ptr<client::Client> client_;
};

// The same cluster with OSD-to-OSD sessions over rdma (--ms-cluster-type rdma): clients
// still write over tcp, primaries write their replicas' rings one-sidedly.
class RdmaClusterReplicationTest : public ReplicationTest {
 protected:
  void SetUp() override {
    cluster_type_ = "rdma";
    ReplicationTest::SetUp();
  }
};

TEST_F(ReplicationTest, EveryWriteLandsOnEveryMemberOfItsActingSet) {
  WriteObjects(0, 40, 1);
  uint64_t copies = 0;
  for (int id = 0; id < kOsds; ++id) copies += Objects(id);
  EXPECT_EQ(copies, 3u * 40);
  // Every client record (large objects are several) went to two replicas.
  uint64_t client_records = 0, replica_records = 0;
  RecordCounts(&client_records, &replica_records);
  EXPECT_GT(client_records, 40u);
  EXPECT_EQ(replica_records, 2 * client_records);
  // Forwarded records carry the crc the primary's poller checked: no OSD ran crc32c over
  // a payload to send it (RecordDesc::payload_crc).
  EXPECT_GT(Sum("tcp", "record_bytes_sent"), 0u);
  EXPECT_EQ(Sum("tcp", "record_crc_bytes_tx"), 0u);
  // Copies by the OSDs' CPUs to send records: the kernel's socket copy of every payload
  // sent (record_bytes_sent), plus a copy into the frame of each small one only: the 300
  // KiB objects' records (of 64 KiB and less) went from the clients' rings to the
  // replicas' sockets; their last parts (44 KiB), and the small objects, were copied.
  const uint64_t frame_copies =
      Sum("tcp", "payload_bytes_copied_tx") - Sum("tcp", "record_bytes_sent");
  EXPECT_LE(frame_copies, 2u * (32 * (4096 + 40) + 8 * (44 << 10)));
  EXPECT_GE(Sum("tcp", "record_bytes_sent"), 2u * 8 * (300 << 10));
  ExpectForwardedInlineMostly(replica_records);
  // Each OSD holds exactly the objects whose acting set names it.
  const placement::PlacementMap map = Map();
  for (int id = 0; id < kOsds; ++id) {
    uint64_t expected = 0;
    for (int i = 0; i < 40; ++i) {
      const auto& acting = map.ActingOfPg(map.PgOf(absl::StrCat("obj.", i)));
      expected += std::count(acting.begin(), acting.end(), id);
    }
    EXPECT_EQ(Objects(id), expected) << "osd." << id;
    EXPECT_EQ(Perf(id)["replication"]["pool_size"].get<uint64_t>(), 3u);
  }
  ExpectObjects(0, 40, 1);
}

TEST_F(ReplicationTest, AcknowledgedObjectsReadBackWhileAMemberIsDown) {
  WriteObjects(0, 30, 1);
  osds_[0].reset();  // as kill -9 for its peers: its memory store is gone with it
  WaitUp(0, false);
  // Every PG osd.0 led is now served by its next member, which has every acked write.
  ExpectObjects(0, 30, 1);
  // Writes go on with 2 of 3 copies (min_size 2), overwrites included.
  WriteObjects(20, 30, 2);
  ExpectObjects(0, 20, 1);
  ExpectObjects(20, 30, 2);
  uint64_t degraded = 0;
  for (int id = 1; id < kOsds; ++id) {
    degraded += Perf(id)["replication"]["writes_degraded"].get<uint64_t>();
  }
  EXPECT_GT(degraded, 0u);
}

TEST_F(RdmaClusterReplicationTest, ReplicasAreWrittenOverRdmaAndReadBackWhileAMemberIsDown) {
  WriteObjects(0, 40, 1);
  uint64_t copies = 0, client_records = 0, replica_records = 0;
  RecordCounts(&client_records, &replica_records);
  for (int id = 0; id < kOsds; ++id) copies += Objects(id);
  EXPECT_EQ(copies, 3u * 40);
  EXPECT_EQ(replica_records, 2 * client_records);
  // Client records came over tcp, every replica record over rdma, none of them over tcp.
  EXPECT_EQ(Sum("tcp", "records_received"), client_records);
  EXPECT_EQ(Sum("rdma", "records_received"), replica_records);
  EXPECT_GT(Sum("rdma", "record_bytes_sent"), 0u);
  EXPECT_EQ(Sum("rdma", "record_crc_bytes_tx"), 0u);
  ExpectForwardedInlineMostly(replica_records);
  // The 300 KiB objects' records (8 objects, several records each, two replicas) went
  // from the clients' rings to the replicas' without a copy on the primary: staged are
  // only the small objects' payloads (32 of at most 4 KiB + 40 bytes, twice each).
  EXPECT_GE(SumRdma("zero_copy_records"), 2u * 8 * 2);
  EXPECT_LE(SumRdma("record_payload_bytes_staged"), 2u * 32 * (4096 + 40));
  EXPECT_GE(Sum("rdma", "record_bytes_sent"), 2u * 8 * (300 << 10));
  ExpectObjects(0, 40, 1);
  // A member killed: acknowledged objects read back from the others, writes go on degraded.
  osds_[0].reset();
  WaitUp(0, false);
  ExpectObjects(0, 40, 1);
  WriteObjects(20, 30, 2);
  ExpectObjects(0, 20, 1);
  ExpectObjects(20, 30, 2);
}

TEST_F(ReplicationTest, AnRdmaClusterTypeNeedsTheOsdToServeRdma) {
  OsdOptions o;
  o.id = 9;
  o.mon_addr = mon_->addr();
  o.durability = store::Durability::kMemory;
  o.auth = kAuth;
  o.cluster_ms_type = "rdma";  // ms_types is {"tcp"}
  auto osd = Osd::Start(o);
  ASSERT_FALSE(osd.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(osd.status()));
  EXPECT_NE(osd.status().message().find("--ms-cluster-type rdma needs the OSD to serve rdma"),
            std::string::npos)
      << osd.status();
}

TEST_F(ReplicationTest, ADeleteRemovesEveryCopyAndStaysDeletedWhenThePrimaryDies) {
  WriteObjects(0, 30, 1);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(client_->Delete(absl::StrCat("obj.", i)).ok()) << "obj." << i;
  }
  // 10 objects left, 3 copies each: the deleted ones are gone from the replicas too.
  uint64_t copies = 0, replicated = 0;
  for (int id = 0; id < kOsds; ++id) {
    copies += Objects(id);
    replicated += Perf(id)["replication"]["deletes_replicated"].get<uint64_t>();
    EXPECT_EQ(Perf(id)["replication"]["replica_delete_failures"].get<uint64_t>(), 0u);
  }
  EXPECT_EQ(copies, 3u * 10);
  EXPECT_EQ(replicated, 20u);
  // With each OSD gone in turn, whoever serves a PG now says the deleted objects are gone.
  osds_[0].reset();
  WaitUp(0, false);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(absl::IsNotFound(client_->Read(absl::StrCat("obj.", i)).status())) << "obj." << i;
  }
  ExpectObjects(20, 10, 1);
  // A delete of an object that was never written says so, and changes nothing.
  EXPECT_TRUE(absl::IsNotFound(client_->Delete("never.written")));
}

TEST_F(ReplicationTest, BelowMinSizeADeleteIsRefusedAndDeletesNothing) {
  const placement::PlacementMap map = Map();
  std::string oid;
  for (int i = 0; i < 200 && oid.empty(); ++i) {
    const std::string o = absl::StrCat("d.", i);
    const auto& acting = map.ActingOfPg(map.PgOf(o));
    if (std::count(acting.begin(), acting.end(), 1) && std::count(acting.begin(), acting.end(), 2) &&
        acting[0] != 1 && acting[0] != 2) {
      oid = o;
    }
  }
  ASSERT_FALSE(oid.empty());
  ASSERT_TRUE(client_->Write(oid, std::string(4096, 'd')).ok());
  osds_[1].reset();
  osds_[2].reset();
  WaitUp(1, false);
  WaitUp(2, false);
  // One of three copies reachable: the primary refuses (the client retries to its timeout).
  const absl::Status s = client_->Delete(oid);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(absl::IsNotFound(s)) << s;
  auto got = client_->Read(oid);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(4096, 'd'));
}

// Recovery: an OSD with a durable store is stopped, the others take overwrites and
// deletes, and it comes back with its old copies. Before it serves anything, the PGs it
// leads pull the newest copies and the PGs it is a replica of push them to it; then, with
// two other OSDs gone, every read (many served from its copies) returns the newest
// version and no deleted object comes back.
TEST_F(ReplicationTest, ARestartedOsdIsRecoveredBeforeItServesItsStaleCopies) {
  RestartOsd0Durable();
  MissWritesOnOsd0();
  StartOsd(0);  // its store still has version 1 of all 40
  WaitUp(0, true);
  WaitActive(32);
  uint64_t recovered = 0;
  for (int id = 0; id < kOsds; ++id) {
    recovered += Perf(id)["peering"]["objects_recovered"].get<uint64_t>();
  }
  EXPECT_GT(recovered, 0u);
  // Each OSD holds exactly the objects whose acting set names it, osd.0 included.
  ExpectPlacedAndNewestWithOthersDown(40);
}

// Recovery from the PG log: the primaries that led osd.0's PGs while it was down tracked
// what it missed, so when it comes back with its store they copy it exactly those objects
// and compare no whole copies. (Where osd.0 itself leads a PG again it pulls by comparing
// copies: its own log did not survive its restart.)
TEST_F(ReplicationTest, AReturningReplicaGetsOnlyWhatItMissedFromThePrimarysPgLog) {
  RestartOsd0Durable();
  WriteObjects(40, 160, 1);  // 160 objects osd.0 will not miss
  MissWritesOnOsd0();        // it misses 0..19 (version 2) and the deletes of 20..29
  auto peering = [&](const char* counter) {
    uint64_t n = 0;
    for (int id = 1; id < kOsds; ++id) n += Perf(id)["peering"][counter].get<uint64_t>();
    return n;
  };
  const uint64_t from_log = peering("recoveries_from_log");
  const uint64_t backfills = peering("backfills");
  const uint64_t recovered = peering("objects_recovered");
  const uint64_t digested = peering("bytes_digested");
  EXPECT_GT(peering("pg_log_entries"), 0u);
  StartOsd(0);
  WaitUp(0, true);
  WaitActive(32);

  const placement::PlacementMap map = Map();
  uint64_t missed_as_replica = 0;  // objects of 0..29 in PGs osd.0 is a replica of
  uint64_t led_bytes = 0;          // bytes of the live objects of the PGs osd.0 leads
  for (int i = 0; i < 200; ++i) {
    const uint32_t pg = map.PgOf(absl::StrCat("obj.", i));
    const auto& acting = map.ActingOfPg(pg);
    const bool member = std::count(acting.begin(), acting.end(), 0) > 0;
    if (map.OsdOfPg(pg) == 0) {
      if (i < 20 || i >= 30) led_bytes += i % 5 == 0 ? 300 << 10 : 4096 + i;
    } else if (member && i < 30) {
      ++missed_as_replica;
    }
  }
  ASSERT_GT(missed_as_replica, 0u) << "placement left osd.0 no replica PG with a missed object";
  EXPECT_GT(peering("recoveries_from_log"), from_log);
  EXPECT_EQ(peering("backfills"), backfills) << "a primary compared whole copies with osd.0";
  EXPECT_EQ(peering("objects_recovered") - recovered, missed_as_replica);
  // Only osd.0's pulls of the PGs it leads read objects on the others (their listings).
  EXPECT_LE(peering("bytes_digested") - digested, led_bytes);

  // Each OSD holds exactly the objects whose acting set names it, and osd.0's copies are the
  // newest: read back with the two others of their acting sets down.
  ExpectPlacedAndNewestWithOthersDown(200);
}

// A primary that comes back leads its PGs again (placement is stable): each is synced from
// the interim primary's PG log -- what osd.0 missed while it was down -- plus the objects
// osd.0 wrote itself after its watermark, with nothing read to compare copies. osd.0 is
// stopped with the state file of an earlier lazy save put back, as a kill -9 leaves it:
// its watermarks are older than its last writes, which are then candidates.
TEST_F(ReplicationTest, AReturningPrimaryIsSyncedFromTheInterimPrimarysPgLog) {
  RestartOsd0Durable();
  WriteObjects(40, 160, 1);  // 160 objects osd.0 will not miss
  WriteObjects(0, 40, 1);
  absl::SleepFor(absl::Seconds(2));  // a lazy save of the state file with these watermarks
  const std::string state_path = data_dirs_[0] + "/pg_states";
  std::string saved;
  {
    std::ifstream in(state_path);
    saved.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_FALSE(saved.empty());
  WriteObjects(30, 10, 1);  // after that save: candidates (the same version everywhere)
  osds_[0].reset();
  { std::ofstream(state_path, std::ios::trunc) << saved; }
  WaitUp(0, false);
  WriteObjects(0, 20, 2);
  DeleteObjects(20, 10);
  auto others = [&](const char* counter) {
    uint64_t n = 0;
    for (int id = 1; id < kOsds; ++id) n += Perf(id)["peering"][counter].get<uint64_t>();
    return n;
  };
  const uint64_t digested = others("bytes_digested");
  const uint64_t backfills = others("backfills");
  StartOsd(0);
  WaitUp(0, true);
  WaitActive(32);

  const placement::PlacementMap map = Map();
  uint64_t led_bytes = 0;  // bytes of the live objects of the PGs osd.0 leads
  for (int i = 0; i < 200; ++i) {
    if (map.OsdOfPg(map.PgOf(absl::StrCat("obj.", i))) != 0 || (i >= 20 && i < 30)) continue;
    led_bytes += i % 5 == 0 ? 300 << 10 : 4096 + i;
  }
  const nlohmann::json p0 = Perf(0)["peering"];
  const uint64_t pulls_from_log = p0["pulls_from_log"].get<uint64_t>();
  const uint64_t read_to_compare =
      p0["bytes_digested"].get<uint64_t>() + others("bytes_digested") - digested;
  std::printf("osd.0 back: pulls_from_log %llu, fallbacks %llu, backfills %llu (others +%llu), "
              "bytes_digested %llu (whole copies of the PGs it leads: %llu bytes), "
              "objects_recovered %llu\n",
              static_cast<unsigned long long>(pulls_from_log),
              static_cast<unsigned long long>(p0["log_pull_fallbacks"].get<uint64_t>()),
              static_cast<unsigned long long>(p0["backfills"].get<uint64_t>()),
              static_cast<unsigned long long>(others("backfills") - backfills),
              static_cast<unsigned long long>(read_to_compare),
              static_cast<unsigned long long>(led_bytes),
              static_cast<unsigned long long>(p0["objects_recovered"].get<uint64_t>()));
  EXPECT_GT(pulls_from_log, 0u);
  EXPECT_EQ(p0["log_pull_fallbacks"].get<uint64_t>(), 0u);
  EXPECT_GE(MonitorLogSyncs(0, pulls_from_log), pulls_from_log)
      << "monctl status counts osd.0's pulls among its syncs from PG logs";
  EXPECT_EQ(p0["backfills"].get<uint64_t>(), 0u) << "osd.0 compared whole copies";
  EXPECT_EQ(others("backfills"), backfills) << "a primary compared whole copies with osd.0";
  EXPECT_LT(read_to_compare, led_bytes / 10) << "copies were read to be compared";

  ExpectScrubClean();
  ExpectPlacedAndNewestWithOthersDown(200);
}

// osd.0, the primary, deletes an object its replicas refuse to delete (not acknowledged:
// a version of its own that no other copy has), then dies. The interim primary's log
// cannot know that: osd.0 finds the object among its own writes after its watermark and
// takes it back from the interim primary's copy when it returns.
TEST_F(ReplicationTest, AReturningPrimaryUndoesItsOwnUnacknowledgedDelete) {
  RestartOsd0Durable();
  const placement::PlacementMap map = Map();
  std::string oid;
  std::vector<int> acting;
  for (int i = 0; i < 500 && oid.empty(); ++i) {
    const std::string o = absl::StrCat("d.", i);
    acting = map.ActingOfPg(map.PgOf(o));
    if (acting.size() == 3 && acting[0] == 0) oid = o;
  }
  ASSERT_FALSE(oid.empty());
  ASSERT_TRUE(client_->Write(oid, Contents(7, 1, 8192)).ok());
  refuse_[acting[1]] = true;
  refuse_[acting[2]] = true;
  EXPECT_FALSE(client_->Delete(oid).ok()) << "confirmed while the replicas kept their copies";
  // The client retried the refused delete (UNAVAILABLE) until its op timeout: its last
  // attempt may still be on its way to the replicas, so they keep refusing until osd.0,
  // which forwards it, is gone (a CI run lost d.2 on them when they stopped refusing first).
  EXPECT_EQ(Objects(acting[1]), 1u);
  osds_[0].reset();
  WaitUp(0, false);
  refuse_[acting[1]] = false;
  refuse_[acting[2]] = false;
  EXPECT_EQ(Objects(acting[1]), 1u) << "the replicas kept the copy osd.0 deleted";
  auto got = client_->Read(oid);
  ASSERT_TRUE(got.ok()) << "from the interim primary: " << got.status();
  StartOsd(0);
  WaitUp(0, true);
  WaitActive(32);
  EXPECT_GT(Perf(0)["peering"]["pulls_from_log"].get<uint64_t>(), 0u);
  got = client_->Read(oid);
  ASSERT_TRUE(got.ok()) << "osd.0 kept its unacknowledged delete: " << got.status();
  EXPECT_TRUE(*got == Contents(7, 1, 8192));
  ExpectScrubClean();
}

// A stale copy never goes active alone: every OSD is stopped (a whole-cluster restart), the one that missed writes and deletes comes back first and is the only
// up member of its PGs. It must not serve its old copies, nor spread them to the others
// once they return (the thrasher found both); with all back, the newest versions win.
TEST_F(ReplicationTest, AStaleCopyAloneWaitsForTheOsdsThatMayHoldNewerOnes) {
  durable_ = {0, 1, 2, 3};
  for (int id = 0; id < kOsds; ++id) {
    osds_[id].reset();
    StartOsd(id);
  }
  for (int id = 0; id < kOsds; ++id) WaitUp(id, true);
  WaitActive(32);
  MissWritesOnOsd0();
  for (int id = 1; id < kOsds; ++id) osds_[id].reset();
  for (int id = 1; id < kOsds; ++id) WaitUp(id, false);
  StartOsd(0);  // version 1 of all 40, and nobody else up
  WaitUp(0, true);
  // An object osd.0 holds, overwritten while it was away: not served from its old copy.
  const placement::PlacementMap map = Map();
  int probe = -1;
  for (int i = 0; i < 20 && probe < 0; ++i) {
    const auto& acting = map.ActingOfPg(map.PgOf(absl::StrCat("obj.", i)));
    if (std::count(acting.begin(), acting.end(), 0)) probe = i;
  }
  ASSERT_GE(probe, 0);
  auto stale = client_->Read(absl::StrCat("obj.", probe));
  EXPECT_FALSE(stale.ok() && *stale == Contents(probe, 1, probe % 5 == 0 ? 300 << 10 : 4096 + probe))
      << "obj." << probe << ": osd.0 served its old copy alone";
  EXPECT_GT(Perf(0)["peering"]["pgs_peering"].get<uint64_t>(), 0u);
  for (int id = 1; id < kOsds; ++id) StartOsd(id);
  for (int id = 1; id < kOsds; ++id) WaitUp(id, true);
  WaitActive(32);
  ExpectObjects(0, 20, 2);
  ExpectDeleted(20, 10);
  ExpectObjects(30, 10, 1);
}

// Backfill at size 1 (the README's old stale read): objects move off an OSD marked out
// and are copied to their new holders before those serve them; overwritten there, they
// move back when it is marked in, and it serves the new versions, not its old copies.
TEST_F(ReplicationTest, OutAndInMoveObjectsWithoutStaleReadsAtSizeOneAndDropStrays) {
  auto mc = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_NO_FATAL_FAILURE(CreateSinglePool(**mc));
  client::ClientOptions co = SinglePoolClientOptions();
  auto one = client::Client::Create(co);
  ASSERT_TRUE(one.ok()) << one.status();
  constexpr int kObjects = 40;
  for (int i = 0; i < kObjects; ++i) {
    ASSERT_TRUE((*one)->Write(absl::StrCat("s.", i), Contents(i, 1, 4096 + i)).ok());
  }
  const uint64_t held_before_out = Perf(1)["store"]["objects"].get<uint64_t>();
  ASSERT_GT(held_before_out, 0u);
  ASSERT_TRUE((*mc)->MarkOut(1).ok());
  absl::SleepFor(absl::Milliseconds(300));  // the OSDs and the client follow the map
  WaitActive(32 + 16);
  for (int i = 0; i < kObjects; ++i) {
    auto got = (*one)->Read(absl::StrCat("s.", i));
    ASSERT_TRUE(got.ok()) << "s." << i << " after out: " << got.status();
    EXPECT_TRUE(*got == Contents(i, 1, 4096 + i)) << "s." << i;
  }
  // osd.1, out, leads nothing and is a member of nothing: once each PG's members are all up
  // and complete, its copies are strays and their primaries have them removed.
  uint64_t left = 0;
  for (int i = 0; i < 200; ++i) {
    left = Perf(1)["store"]["objects"].get<uint64_t>();
    if (left == 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(left, 0u) << "of " << held_before_out << " objects, osd.1 kept strays after it was out";
  EXPECT_GT(Perf(1)["peering"]["strays_removed"].get<uint64_t>(), 0u);
  EXPECT_EQ(Perf(1)["peering"]["stray_objects_removed"].get<uint64_t>(), held_before_out);
  for (int i = 0; i < kObjects; i += 2) {
    ASSERT_TRUE((*one)->Write(absl::StrCat("s.", i), Contents(i, 2, 5000 + i)).ok());
  }
  ASSERT_TRUE((*one)->Delete("s.1").ok());
  ASSERT_TRUE((*mc)->MarkIn(1).ok());
  absl::SleepFor(absl::Milliseconds(300));
  WaitActive(32 + 16);
  for (int i = 0; i < kObjects; ++i) {
    auto got = (*one)->Read(absl::StrCat("s.", i));
    if (i == 1) {
      EXPECT_TRUE(absl::IsNotFound(got.status())) << "s.1 was deleted while osd.1 was out";
      continue;
    }
    ASSERT_TRUE(got.ok()) << "s." << i << " after in: " << got.status();
    EXPECT_TRUE(*got == (i % 2 == 0 ? Contents(i, 2, 5000 + i) : Contents(i, 1, 4096 + i)))
        << "s." << i << " is an old version";
  }
}

// A primary that has not yet seen the map that moves its PG away, with a client that has
// not either, still acknowledges a write (size 1: no replica refuses it). The new primary
// peers meanwhile; its query makes the old primary catch up to the new map (and let the
// writes it admitted under the old one reach its store) before it answers, so the copy the
// new primary pulls has that write. Without it the pull took the copy before the write and
// the acknowledged write was lost (the README's old "ops carry no map epoch" limit).
TEST_F(ReplicationTest, AWriteThatAStalePrimaryAcknowledgedIsInTheCopyItsSuccessorPulls) {
  auto mc = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_NO_FATAL_FAILURE(CreateSinglePool(**mc));
  client::ClientOptions co = SinglePoolClientOptions();
  co.map_hook = [this](uint64_t) { WaitUnheld(kHeldClient); };
  auto stale = client::Client::Create(co);
  ASSERT_TRUE(stale.ok()) << stale.status();
  absl::Cleanup release = [this] { Hold({}); };  // before `stale` joins its watch thread
  auto map = (*mc)->GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  const auto pool = placement::FindPool(*map, "single");
  ASSERT_TRUE(pool.has_value());
  const placement::PlacementMap before = placement::ToPlacementMap(*map, "tcp", *pool);
  const std::string oid = "moved";
  const int old_primary = before.OsdOfPg(before.PgOf(oid));
  ASSERT_GE(old_primary, 0);
  ASSERT_TRUE((*stale)->Write(oid, Contents(1, 1, 8192)).ok());

  // The old primary and the stale client keep the old map; the others follow the out.
  Hold({old_primary, kHeldClient});
  ASSERT_TRUE((*mc)->MarkOut(static_cast<uint32_t>(old_primary)).ok());
  absl::SleepFor(absl::Milliseconds(300));  // the new primary peers (or waits)
  ASSERT_TRUE((*stale)->Write(oid, Contents(1, 2, 8192)).ok())
      << "the old primary, on its old map, still takes the write";
  absl::SleepFor(absl::Milliseconds(300));  // without the rule the new primary is active now
  Hold({});
  absl::SleepFor(absl::Milliseconds(300));
  WaitActive(32 + 16);

  co.map_hook = nullptr;
  auto fresh = client::Client::Create(co);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  auto got = (*fresh)->Read(oid);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == Contents(1, 2, 8192))
      << "the write osd." << old_primary << " acknowledged on its old map was lost";
  EXPECT_GT(Perf(old_primary)["peering"]["queries_behind_map"].get<uint64_t>(), 0u);
}

// A member that stays up in the map but does not take its copy (here its store refuses it):
// the write (or delete) is not acknowledged, even with min_size copies elsewhere. The member still
// counts as complete for its PG, so had the write been acknowledged, a later sync from its
// copy would lose it. Once the member takes copies again, the retried write goes through.
TEST_F(ReplicationTest, AWriteOrDeleteThatAMemberUpInTheMapDidNotTakeIsNotAcknowledged) {
  const placement::PlacementMap map = Map();
  std::string oid;  // one whose acting set has osd.3 as a replica
  for (int i = 0; i < 500 && oid.empty(); ++i) {
    const std::string o = absl::StrCat("r.", i);
    const auto& acting = map.ActingOfPg(map.PgOf(o));
    if (acting.size() == 3 && acting[0] != 3 && std::count(acting.begin(), acting.end(), 3)) oid = o;
  }
  ASSERT_FALSE(oid.empty());
  refuse_[3] = true;
  const absl::Status s = client_->Write(oid, std::string(4096, 'a'));
  EXPECT_FALSE(s.ok()) << "acknowledged without osd.3's copy while osd.3 is up in the map";
  uint64_t missing = 0, degraded = 0;
  for (int id = 0; id < kOsds; ++id) {
    missing += Perf(id)["replication"]["writes_replica_missing"].get<uint64_t>();
    degraded += Perf(id)["replication"]["writes_degraded"].get<uint64_t>();
  }
  EXPECT_GT(missing, 0u);
  EXPECT_EQ(degraded, 0u);
  refuse_[3] = false;
  ASSERT_TRUE(client_->Write(oid, std::string(4096, 'b')).ok());
  auto got = client_->Read(oid);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(4096, 'b'));
  EXPECT_EQ(Objects(3), 1u);

  // The same for a delete: not confirmed while osd.3 keeps its copy, then done on a retry.
  refuse_[3] = true;
  EXPECT_FALSE(client_->Delete(oid).ok()) << "confirmed while osd.3, up, kept its copy";
  EXPECT_EQ(Objects(3), 1u);
  refuse_[3] = false;
  // (The primary's copy went with the first attempt: the new delete may say NOT_FOUND.)
  const absl::Status again = client_->Delete(oid);
  EXPECT_TRUE(again.ok() || absl::IsNotFound(again)) << again;
  EXPECT_TRUE(absl::IsNotFound(client_->Read(oid).status()));
  EXPECT_EQ(Objects(3), 0u);
}

TEST_F(ReplicationTest, BelowMinSizeAWriteWaitsAndIsRefused) {
  osds_[1].reset();
  osds_[2].reset();
  WaitUp(1, false);
  WaitUp(2, false);
  const placement::PlacementMap map = Map();
  std::string blocked, open;
  for (int i = 0; i < 200 && (blocked.empty() || open.empty()); ++i) {
    const std::string oid = absl::StrCat("x.", i);
    const auto& acting = map.ActingOfPg(map.PgOf(oid));
    const bool both = std::count(acting.begin(), acting.end(), 1) &&
                      std::count(acting.begin(), acting.end(), 2);
    (both ? blocked : open) = oid;
  }
  ASSERT_FALSE(blocked.empty());
  ASSERT_FALSE(open.empty());
  // One copy of three can be written: refused until the op timeout.
  EXPECT_FALSE(client_->Write(blocked, std::string(4096, 'b')).ok());
  uint64_t refused = 0;
  for (int id : {0, 3}) {
    refused += Perf(id)["replication"]["writes_below_min_size"].get<uint64_t>();
  }
  EXPECT_GT(refused, 0u);
  // A PG with two members up takes writes.
  EXPECT_TRUE(client_->Write(open, std::string(4096, 'o')).ok());
  // Back to min_size: the waiting PG takes writes again.
  StartOsd(1);
  WaitUp(1, true);
  EXPECT_TRUE(client_->Write(blocked, std::string(4096, 'c')).ok());
  auto got = client_->Read(blocked);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(4096, 'c'));
}

// Pools side by side with the size-3 default pool: a size-2 pool and a size-1 pool, each
// object kept as many times as its pool says on the members of its pool's acting set; the
// same oid in two pools is two objects (own contents, own listing).
TEST_F(ReplicationTest, PoolsKeepTheirOwnSizesAndTheirOwnObjects) {
  auto mc = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
  ASSERT_TRUE(mc.ok()) << mc.status();
  for (auto [name, size] : {std::pair<const char*, uint32_t>{"two", 2}, {"one", 1}}) {
    mon::v1::CreatePoolRequest req;
    req.set_name(name);
    req.set_size(size);
    req.set_pg_num(16);
    auto r = (*mc)->CreatePool(req);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  auto connect = [&](const std::string& pool) -> std::unique_ptr<client::Client> {
    client::ClientOptions co;
    co.mon_addr = mon_->addr();
    co.auth = kAuth;
    co.op_timeout = absl::Seconds(10);
    co.max_record_payload = 64 << 10;
    co.pool = pool;
    auto c = client::Client::Create(co);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  };
  auto two = connect("two");
  auto one = connect("one");
  ASSERT_NE(two, nullptr);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(two->pool_id(), 1u);
  EXPECT_EQ(one->pool_id(), 2u);

  constexpr int kObjects = 20;
  for (int i = 0; i < kObjects; ++i) {
    const std::string oid = absl::StrCat("p.", i);
    const size_t size = i % 5 == 0 ? 300 << 10 : 4096 + i;
    ASSERT_TRUE(two->Write(oid, Contents(i, 2, size)).ok()) << oid;
    ASSERT_TRUE(one->Write(oid, Contents(i, 1, size)).ok()) << oid;
  }
  ASSERT_TRUE(client_->Write("p.0", Contents(0, 3, 1000)).ok());  // the default pool's p.0

  // Copies per pool: each OSD holds exactly what the acting sets of the pools name.
  auto map = (*mc)->GetMap();
  ASSERT_TRUE(map.ok());
  std::map<std::string, placement::PlacementMap> pools;
  for (const placement::PoolInfo& p : placement::PoolsOf(*map)) {
    pools[p.name] = placement::ToPlacementMap(*map, "tcp", p);
  }
  ASSERT_EQ(pools.size(), 3u);
  EXPECT_EQ(pools["two"].pool().size, 2u);
  EXPECT_EQ(pools["one"].pool().size, 1u);
  uint64_t total = 0;
  for (int id = 0; id < kOsds; ++id) {
    uint64_t expected = 0;
    for (const char* pool : {"two", "one"}) {
      const placement::PlacementMap& m = pools[pool];
      for (int i = 0; i < kObjects; ++i) {
        const auto& acting = m.ActingOfPg(m.PgOf(absl::StrCat("p.", i)));
        expected += std::count(acting.begin(), acting.end(), id);
      }
    }
    const auto& dflt = pools["default"];
    const auto& acting = dflt.ActingOfPg(dflt.PgOf("p.0"));
    expected += std::count(acting.begin(), acting.end(), id);
    EXPECT_EQ(Objects(id), expected) << "osd." << id;
    total += Objects(id);
    EXPECT_EQ(Perf(id)["replication"]["pool_size"].get<uint64_t>(), 3u) << "the largest pool";
  }
  EXPECT_EQ(total, 2u * kObjects + 1u * kObjects + 3u);

  // Same oid, three pools, three objects.
  for (int i = 0; i < kObjects; ++i) {
    const std::string oid = absl::StrCat("p.", i);
    const size_t size = i % 5 == 0 ? 300 << 10 : 4096 + i;
    auto a = two->Read(oid);
    auto b = one->Read(oid);
    ASSERT_TRUE(a.ok() && b.ok()) << oid << ": " << a.status() << " / " << b.status();
    EXPECT_TRUE(*a == Contents(i, 2, size)) << oid << " in pool two";
    EXPECT_TRUE(*b == Contents(i, 1, size)) << oid << " in pool one";
  }
  auto d = client_->Read("p.0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(*d == Contents(0, 3, 1000));
  EXPECT_TRUE(absl::IsNotFound(client_->Stat("p.1").status()));
  auto st = one->Stat("p.1");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(*st, 4097u);

  // Listings cover one pool, with the plain oids.
  auto ls_two = two->List("");
  auto ls_default = client_->List("");
  ASSERT_TRUE(ls_two.ok() && ls_default.ok());
  EXPECT_EQ(ls_two->size(), static_cast<size_t>(kObjects));
  EXPECT_EQ(ls_two->front().oid, "p.0");
  ASSERT_EQ(ls_default->size(), 1u);
  EXPECT_EQ(ls_default->front().oid, "p.0");
  EXPECT_EQ(ls_default->front().size, 1000u);

  // A delete in one pool leaves the others alone.
  ASSERT_TRUE(one->Delete("p.1").ok());
  EXPECT_TRUE(absl::IsNotFound(one->Stat("p.1").status()));
  EXPECT_TRUE(two->Stat("p.1").ok());

  // An unknown pool is an error naming the pools there are.
  client::ClientOptions co;
  co.mon_addr = mon_->addr();
  co.auth = kAuth;
  co.pool = "nosuch";
  auto bad = client::Client::Create(co);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bad.status().message(), "no pool 'nosuch' (pools: default, two, one)");
}

}  // namespace
}  // namespace msgr::osd
