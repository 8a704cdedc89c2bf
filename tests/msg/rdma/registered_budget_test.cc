#include "msg/rdma/registered_budget.h"

#include <atomic>
#include <deque>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace msgr::rdma {
namespace {

TEST(RegisteredBudget, ChargesUntilFullThenRefusesWithWhatAndHowToRaiseIt) {
  auto b = RegisteredBudget::Create(100 << 10);
  auto a = b->Take(60 << 10, "ring A");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->bytes(), 60u << 10);
  EXPECT_EQ(b->used(), 60u << 10);
  auto c = b->Take(40 << 10, "ring C");  // exactly full is allowed
  ASSERT_TRUE(c.ok()) << c.status();
  auto d = b->Take(1, "a zero-copy payload");
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(d.status())) << d.status();
  const std::string msg(d.status().message());
  EXPECT_NE(msg.find("a zero-copy payload"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100 KiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rdma_max_registered_mb"), std::string::npos) << msg;
  EXPECT_EQ(b->used(), 100u << 10) << "a refusal must not charge anything";
  EXPECT_EQ(b->refusals(), 1u);
  EXPECT_FALSE(b->Take(uint64_t{1} << 40, "huge").ok()) << "no overflow past the maximum";
}

TEST(RegisteredBudget, ChargeIsGivenBackOnceWhenDestroyedOrReplaced) {
  auto b = RegisteredBudget::Create(1 << 20);
  {
    auto a = b->Take(300 << 10, "a");
    ASSERT_TRUE(a.ok());
    RegisteredBudget::Charge moved = std::move(*a);
    EXPECT_EQ(a->bytes(), 0u);
    EXPECT_EQ(b->used(), 300u << 10);
    RegisteredBudget::Charge other = std::move(*b->Take(100 << 10, "b"));
    EXPECT_EQ(b->used(), 400u << 10);
    other = std::move(moved);  // gives back b's 100 KiB, takes over a's 300
    EXPECT_EQ(b->used(), 300u << 10);
  }
  EXPECT_EQ(b->used(), 0u);
  RegisteredBudget::Charge none;  // holds nothing, gives back nothing
  EXPECT_EQ(none.bytes(), 0u);
}

// The backend registers memory only through AllocCharged/RegisterCharged: the region
// holds its share while it is registered, a refused region is never registered, and a
// region replaced by assignment is deregistered before its share is given back.
TEST(RegisteredBudget, ChargedRegionsHoldTheirShareWhileRegistered) {
  auto dev = verbs::OpenDevice("soft");
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto pd = (*dev)->CreatePd();
  ASSERT_TRUE(pd.ok()) << pd.status();
  auto b = RegisteredBudget::Create(256 << 10);
  auto ring = AllocCharged(*b, **pd, 128 << 10, verbs::kLocalWrite | verbs::kRemoteWrite,
                           "ring");
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ(b->used(), 128u << 10);
  EXPECT_EQ((*ring)->length(), 128u << 10);
  (*ring)->data()[0] = 1;  // registered memory, ours to use

  auto too_big = AllocCharged(*b, **pd, 200 << 10, verbs::kLocalWrite, "second ring");
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(too_big.status())) << too_big.status();
  EXPECT_EQ(b->used(), 128u << 10) << "a refused region must not keep a charge";

  std::vector<char> payload(64 << 10, 'x');
  auto pinned = RegisterCharged(*b, **pd, payload.data(), payload.size(), 0, "payload");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ((*pinned)->data(), reinterpret_cast<uint8_t*>(payload.data()));
  EXPECT_EQ(b->used(), 192u << 10);

  *ring = std::move(*pinned);  // the ring goes, the payload's region takes its place
  EXPECT_EQ(b->used(), 64u << 10);
  EXPECT_EQ(ring->charged_bytes(), 64u << 10);
  ring->reset();
  EXPECT_FALSE(*ring);
  EXPECT_EQ(b->used(), 0u);
}

TEST(RegisteredBudget, ChargeMayOutliveItsOwnerAndKeepsTheBudgetAlive) {
  auto b = RegisteredBudget::Create(1 << 20);
  auto c = b->Take(4096, "x");
  ASSERT_TRUE(c.ok());
  std::weak_ptr<RegisteredBudget> w = b;
  b.reset();
  EXPECT_FALSE(w.expired());
  *c = RegisteredBudget::Charge();
  EXPECT_TRUE(w.expired());
}

// Four threads each keep up to 16 charges of 2-8 KiB: more than the budget holds.
TEST(RegisteredBudget, ConcurrentTakersNeverExceedTheBudget) {
  constexpr uint64_t kMax = 64 << 10;
  auto b = RegisteredBudget::Create(kMax);
  std::atomic<uint64_t> peak{0};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int n = 0; n < 4; ++n) {
    threads.emplace_back([&] {
      std::deque<RegisteredBudget::Charge> held;
      for (int i = 0; i < 20000; ++i) {
        if (held.size() == 16) held.pop_front();
        auto c = b->Take(2048 + (i % 7) * 1024, "t");
        if (!c.ok()) continue;
        ++granted;
        held.push_back(std::move(*c));
        uint64_t u = b->used(), p = peak.load();
        while (u > p && !peak.compare_exchange_weak(p, u)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), kMax);
  EXPECT_GT(peak.load(), kMax / 2) << "the test never came near the budget";
  EXPECT_GT(b->refusals(), 0u);
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(b->used(), 0u);
}

}  // namespace
}  // namespace msgr::rdma
