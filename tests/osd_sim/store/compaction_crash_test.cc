// kill -9 during compaction: a child overwrites, deletes and writes objects in two parts
// (durable mode, 64 KiB segments, background compaction every millisecond) and reports
// every acknowledged operation through a pipe; its compaction hook kills it at a chosen
// step of a chosen compaction (planned, copies written, copies durable, index repointed,
// segment unlinked, directory synced). The parent reopens the store and checks that every
// object reads back at least its last acknowledged version, byte for byte, and that no
// acknowledged delete was undone (no resurrection), then runs the next child on the
// same directory.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "osd_sim/store/object_store.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::FreshDir;
using testing::Options;
using testing::Pattern;

constexpr int kThreads = 3;
// Thread t owns the oids with index % kThreads == t. Hot ones are written (or deleted)
// every round; in each child, cold ones are written once (their segments stay mostly
// live, so compaction leaves them), doomed ones written once and deleted three rounds
// later, and then left: dropping their deletes too early would bring them back.
constexpr uint32_t kHot = 24;
constexpr uint32_t kCold = 12;
constexpr uint32_t kDoomed = 12;
constexpr uint32_t kOids = kHot + kCold + kDoomed;
bool IsCold(uint32_t i) { return i >= kHot && i < kHot + kCold; }
bool IsDoomed(uint32_t i) { return i >= kHot + kCold; }
constexpr int kSteps = 6;  // CompactionStep values
// Writers run until the kill in the first 2 * kSteps iterations (the hook fires at each
// step twice); in the rest they stop after a random number of rounds, so that an
// object's last write may race a compaction and then stay the newest.
constexpr int kKilledWhileWriting = 2 * kSteps;
constexpr int kIterations = kKilledWhileWriting + 6;

enum class Kind : uint32_t { kWrite, kDelete, kIssuingDelete, kHookFired };

struct Msg {
  uint32_t oid;
  Kind kind;
  uint64_t version;
};
static_assert(sizeof(Msg) <= PIPE_BUF, "messages must be written atomically");

std::string OidName(uint32_t i) { return "cc-" + std::to_string(i); }

// Each object's operations have consecutive versions; which kind a version is follows
// from the version alone.
bool IsDelete(uint64_t v) { return v % 5 == 4; }
bool IsTwoParts(uint64_t v) { return v % 5 == 2; }

// Cold objects are large: the segments they are written to stay more than half live.
std::string Payload(uint32_t i, uint64_t v) {
  const size_t len = IsCold(i)       ? 40 << 10
                     : IsTwoParts(v) ? 16 << 10
                                     : 1024 + (v * 2654435761u + i) % (11 << 10);
  std::string p = Pattern(OidName(i), len, v);
  std::memcpy(p.data(), &v, sizeof(v));
  return p;
}

void Send(int fd, const Msg& m) {
  if (::write(fd, &m, sizeof(m)) != sizeof(m)) _exit(4);
}

[[noreturn]] void RunChild(const std::string& dir, int fd, uint64_t base, CompactionStep kill_at,
                           int kill_on_call, uint64_t rounds) {
  StoreOptions o = Options(dir, Durability::kDurable);
  o.segment_bytes = 64 << 10;
  o.compaction_interval = absl::Milliseconds(1);
  o.compaction_bytes_per_sec = 0;
  std::atomic<int> calls{0};
  o.compaction_hook = [&, fd](CompactionStep step, uint64_t) {
    if (step != kill_at || ++calls < kill_on_call) return;
    Send(fd, Msg{0, Kind::kHookFired, static_cast<uint64_t>(step)});
    ::raise(SIGKILL);
  };
  auto store = ObjectStore::Open(o);
  if (!store.ok()) _exit(2);
  ObjectStore& s = **store;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t round = 0; round < rounds; ++round) {
        for (uint32_t i = static_cast<uint32_t>(t); i < kOids; i += kThreads) {
          const std::string oid = OidName(i);
          uint64_t v = base + round;
          if (IsCold(i) || IsDoomed(i)) {
            if (round == 0) {
              v = base + (IsCold(i) ? 0 : 1);  // plain writes
            } else if (round == 3 && IsDoomed(i)) {
              v = base + 4;  // a delete
            } else {
              continue;
            }
          }
          if (IsDelete(v)) {
            Send(fd, Msg{i, Kind::kIssuingDelete, v});
            auto ticket = s.Delete(oid);
            if (!ticket.ok()) {
              if (ticket.status().code() != absl::StatusCode::kNotFound) _exit(5);
              continue;
            }
            s.WhenDurable(*ticket, [fd, i, v](absl::Status st) {
              if (!st.ok()) _exit(3);
              Send(fd, Msg{i, Kind::kDelete, v});
            });
            continue;
          }
          const std::string data = Payload(i, v);
          const uint32_t crc = PayloadCrc(oid, data.data(), data.size());
          if (!IsTwoParts(v)) {
            struct iovec iov = {const_cast<char*>(data.data()), data.size()};
            auto ticket = s.Append(oid, 0, &iov, 1, crc, kTruncate, [fd, i, v](absl::Status st) {
              if (!st.ok()) _exit(3);
              Send(fd, Msg{i, Kind::kWrite, v});
            });
            if (!ticket.ok()) _exit(5);
            continue;
          }
          // Two parts: acknowledged once both are durable.
          auto left = std::make_shared<std::atomic<int>>(2);
          auto done = [fd, i, v, left](absl::Status st) {
            if (!st.ok()) _exit(3);
            if (--*left == 0) Send(fd, Msg{i, Kind::kWrite, v});
          };
          const size_t half = data.size() / 2;
          struct iovec a = {const_cast<char*>(data.data()), half};
          struct iovec b = {const_cast<char*>(data.data() + half), data.size() - half};
          auto first = s.AppendPart(oid, 0, &a, 1, PayloadCrc(oid, a.iov_base, a.iov_len),
                                    kTruncate | kContinued, 0, done);
          if (!first.ok()) _exit(5);
          auto last = s.AppendPart(oid, half, &b, 1, PayloadCrc(oid, b.iov_base, b.iov_len), 0,
                                   WriteIdOf(*first), done);
          if (!last.ok()) _exit(5);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (;;) ::pause();  // compaction goes on until the hook or the parent kills us
}

struct Seen {
  uint64_t acked = 0;                // highest acknowledged version (0: none)
  std::set<uint64_t> issued_deletes;  // deletes sent to the store, acknowledged or not
};

// Reads messages until `deadline_ms` passes (or EOF; -1: until EOF).
void ReadMsgs(int fd, int deadline_ms, std::map<uint32_t, Seen>* seen, std::set<int>* fired,
              size_t* acks) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  Msg m;
  size_t have = 0;
  while (true) {
    int wait = -1;
    if (deadline_ms >= 0) {
      wait = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  end - std::chrono::steady_clock::now())
                                  .count());
      if (wait <= 0) return;
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, wait) <= 0) continue;
    const ssize_t n = ::read(fd, reinterpret_cast<char*>(&m) + have, sizeof(m) - have);
    if (n <= 0) return;
    have += static_cast<size_t>(n);
    if (have < sizeof(m)) continue;
    have = 0;
    switch (m.kind) {
      case Kind::kHookFired:
        fired->insert(static_cast<int>(m.version));
        break;
      case Kind::kIssuingDelete:
        (*seen)[m.oid].issued_deletes.insert(m.version);
        break;
      case Kind::kWrite:
      case Kind::kDelete: {
        uint64_t& a = (*seen)[m.oid].acked;
        a = std::max(a, m.version);
        ++*acks;
        break;
      }
    }
  }
}

TEST(CompactionCrashTest, NothingAcknowledgedIsLostOrUndoneByKill9AtAnyStepOfCompaction) {
  const std::string dir = FreshDir("compaction-crash");
  std::map<uint32_t, Seen> seen;
  std::set<int> fired;  // steps at which a child was killed by its hook
  std::mt19937 rng(std::random_device{}());
  size_t total_acks = 0;
  uint64_t freed = 0;
  for (int iter = 0; iter < kIterations; ++iter) {
    const int step = iter % kSteps;
    const int on_call = 1 + static_cast<int>(rng() % 4);
    const bool stop_early = iter >= kKilledWhileWriting;
    const uint64_t rounds = stop_early ? 5 + rng() % 100 : UINT64_MAX;
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    // Versions keep growing across children; a multiple of 5 keeps the kinds in order.
    const uint64_t base = static_cast<uint64_t>(iter + 1) * 1000000;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      RunChild(dir, fds[1], base, static_cast<CompactionStep>(step), on_call, rounds);
    }
    ::close(fds[1]);
    size_t acks = 0;
    // The hook kills the child; if compaction has not come to that step by then, we do.
    ReadMsgs(fds[0], stop_early ? 300 : 5000, &seen, &fired, &acks);
    ::kill(pid, SIGKILL);
    ReadMsgs(fds[0], -1, &seen, &fired, &acks);
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child ended on its own, status " << status;
    total_acks += acks;

    StoreOptions o = Options(dir, Durability::kDurable);
    o.segment_bytes = 64 << 10;
    o.background_compaction = false;  // read what recovery found, then compact it
    auto store = ObjectStore::Open(o);
    ASSERT_TRUE(store.ok()) << store.status();
    std::cerr << "iteration " << iter << ": kill at step " << step << " call " << on_call << ", "
              << acks << " acks; recovery: " << (*store)->GetStats().ToString() << "\n";
    auto check = [&](ObjectStore& s, const char* when) {
      for (uint32_t i = 0; i < kOids; ++i) {
        const Seen& w = seen[i];
        auto got = s.Read(OidName(i));
        if (!got.ok()) {
          ASSERT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
          if (w.acked == 0) continue;
          // Gone: the last acknowledged operation was a delete, or a later one was sent.
          const bool deleted = IsDelete(w.acked) || w.issued_deletes.upper_bound(w.acked) !=
                                                        w.issued_deletes.end();
          EXPECT_TRUE(deleted) << when << ": " << OidName(i) << " v" << w.acked
                               << " was acknowledged and is gone";
          continue;
        }
        ASSERT_GE(got->size(), 8u);
        uint64_t v;
        std::memcpy(&v, got->data(), sizeof(v));
        EXPECT_FALSE(IsDelete(v)) << OidName(i);
        EXPECT_GE(v, w.acked) << when << ": " << OidName(i)
                              << " went back to an older version (or came back after its delete)";
        EXPECT_TRUE(*got == Payload(i, v)) << when << ": " << OidName(i) << " v" << v << " differs";
      }
    };
    check(**store, "after recovery");
    // What recovery left (copies beside originals, kept deletes) compacts cleanly too.
    ASSERT_TRUE((*store)->Compact().ok());
    check(**store, "after compacting the recovered store");
    freed += (*store)->GetStats().segments_freed;
  }
  EXPECT_GT(total_acks, 0u);
  EXPECT_GT(freed, 0u);
  EXPECT_EQ(fired.size(), static_cast<size_t>(kSteps))
      << "a child was killed by its hook at only " << fired.size() << " of the steps";
}

}  // namespace
}  // namespace msgr::store
