// kill -9 at random moments: a child appends in durable mode from several threads and
// reports every completed (acknowledged) write through a pipe; the parent kills it,
// reopens the store, and checks that every acknowledged write reads back exactly.
// Run twice: small payloads (buffered path only), and a mix where every other write is
// a large payload in an aligned buffer (O_DIRECT, aligned layout, padding between).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <random>
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

constexpr int kThreads = 4;
constexpr uint32_t kOids = 40;  // thread t owns oids with index % kThreads == t
constexpr int kIterations = 6;

struct Ack {
  uint32_t oid;
  uint32_t pad;
  uint64_t version;
};
static_assert(sizeof(Ack) <= PIPE_BUF, "acks must be written atomically");

std::string OidName(uint32_t i) { return "crash-" + std::to_string(i); }

// The payload of `version` of object `i`: its version in the first 8 bytes, then a
// pattern; sizes vary from 8 bytes to 48 KiB, or with `mix`, every other version is
// 128-256 KiB in whole 4 KiB blocks (written from an aligned buffer: the direct path).
bool Big(uint64_t version, bool mix) { return mix && version % 2 == 0; }
std::string Payload(uint32_t i, uint64_t version, bool mix) {
  const uint64_t h = version * 2654435761u + i;
  const size_t len = Big(version, mix) ? (32 + h % 33) * kDirectAlign : 8 + h % (48 << 10);
  std::string p = Pattern(OidName(i), len, version);
  std::memcpy(p.data(), &version, sizeof(version));
  return p;
}

[[noreturn]] void RunChild(const std::string& dir, int ack_fd, uint64_t base_version, bool mix) {
  StoreOptions o = Options(dir, Durability::kDurable);
  o.segment_bytes = 1 << 20;  // several segments per run
  auto store = ObjectStore::Open(o);
  if (!store.ok()) _exit(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t n = 0;; ++n) {
        const uint32_t i = static_cast<uint32_t>((n * kThreads + t) % kOids);
        const uint64_t version = base_version + n;
        const std::string bytes = Payload(i, version, mix);
        const testing::AlignedCopy data(bytes, Big(version, mix) ? 0 : 1);
        struct iovec iov = {const_cast<char*>(data.data()), data.size()};
        auto ticket = (*store)->Append(OidName(i), 0, &iov, 1, PayloadCrc(OidName(i), data.data(), data.size()),
                                       kTruncate, [ack_fd, i, version](absl::Status s) {
                                         if (!s.ok()) _exit(3);
                                         const Ack a{i, 0, version};
                                         if (::write(ack_fd, &a, sizeof(a)) != sizeof(a)) _exit(4);
                                       });
        if (!ticket.ok()) _exit(5);
      }
    });
  }
  for (auto& th : threads) th.join();  // never: the parent kills us
  _exit(0);
}

// Reads acks until `deadline_ms` passes (or EOF); returns false on EOF.
bool ReadAcks(int fd, int deadline_ms, std::map<uint32_t, uint64_t>* acked, size_t* count) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  std::string buf;
  Ack a;
  size_t have = 0;
  while (true) {
    int wait = deadline_ms < 0 ? -1
                               : static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      end - std::chrono::steady_clock::now())
                                                      .count());
    if (deadline_ms >= 0 && wait <= 0) return true;
    struct pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, wait) <= 0) continue;
    const ssize_t n = ::read(fd, reinterpret_cast<char*>(&a) + have, sizeof(a) - have);
    if (n <= 0) return false;
    have += static_cast<size_t>(n);
    if (have < sizeof(a)) continue;
    have = 0;
    ++*count;
    uint64_t& v = (*acked)[a.oid];
    v = std::max(v, a.version);
  }
}

class CrashTest : public ::testing::TestWithParam<bool> {};

TEST_P(CrashTest, EveryAcknowledgedWriteSurvivesKill9) {
  const bool mix = GetParam();
  const std::string dir = FreshDir(mix ? "crash-mix" : "crash");
  std::map<uint32_t, uint64_t> acked;  // oid -> highest acknowledged version
  std::mt19937 rng(std::random_device{}());
  size_t total_acks = 0;
  size_t big_reads = 0;  // objects read back at a large (direct-path) version
  for (int iter = 0; iter < kIterations; ++iter) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const uint64_t base_version = static_cast<uint64_t>(iter + 1) << 32;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      RunChild(dir, fds[1], base_version, mix);
    }
    ::close(fds[1]);
    size_t acks = 0;
    const int kill_after_ms = 50 + static_cast<int>(rng() % 350);
    ReadAcks(fds[0], kill_after_ms, &acked, &acks);
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ReadAcks(fds[0], -1, &acked, &acks);  // drain acks written before death
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child ended on its own, status " << status;
    total_acks += acks;

    auto store = ObjectStore::Open(Options(dir, Durability::kDurable));
    ASSERT_TRUE(store.ok()) << store.status();
    const StoreStats st = (*store)->GetStats();
    std::cerr << "iteration " << iter << ": killed after " << kill_after_ms << " ms, " << acks
              << " acks; recovery: " << st.ToString() << "\n";
    for (uint32_t i = 0; i < kOids; ++i) {
      auto got = (*store)->Read(OidName(i));
      auto it = acked.find(i);
      if (it == acked.end()) {
        if (!got.ok()) {
          EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
          continue;
        }
      } else {
        ASSERT_TRUE(got.ok()) << OidName(i) << " was acknowledged: " << got.status();
      }
      // Newer unacknowledged versions may have made it too; older ones must not show.
      ASSERT_GE(got->size(), 8u);
      uint64_t version;
      std::memcpy(&version, got->data(), sizeof(version));
      if (it != acked.end()) {
        EXPECT_GE(version, it->second) << OidName(i) << " went back to an older version";
      }
      EXPECT_TRUE(*got == Payload(i, version, mix)) << OidName(i) << " v" << version << " differs";
      if (Big(version, mix)) ++big_reads;
    }
  }
  EXPECT_GT(total_acks, 0u) << "the child never acknowledged anything";
  if (mix) {
    EXPECT_GT(big_reads, 0u) << "no large aligned write was ever read back";
  }
}

INSTANTIATE_TEST_SUITE_P(Payloads, CrashTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "AlignedMix" : "Small";
                         });

}  // namespace
}  // namespace msgr::store
