// EventLoop (msg/rdma/event_loop.cc): clients' completions are polled and handed to the
// right client on the loop thread, a sleeping loop wakes on a completion channel, the
// side-channel fd and the watched fd fire their handlers, ticks run, Remove and Stop
// release the clients. Most cases use a completion queue made here (FakeCq) so that the
// test decides what Poll returns; one runs two soft-provider transports under the loop.
#include "msg/rdma/event_loop.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/rdma/rdma_wire.h"
#include "msg/rdma/registered_budget.h"
#include "msg/rdma/transport.h"
#include "msg/rdma/verbs/device.h"
#include "tests/msg/rdma/soft_context.h"

namespace msgr::rdma {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// Polls `cond` every millisecond until it holds or `d` passes.
template <typename F>
bool Eventually(F cond, absl::Duration d = kWait) {
  const absl::Time end = absl::Now() + d;
  while (!cond()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// A completion queue whose completions the test pushes. Its channel behaves like a verbs
// one: RequestNotify arms it once; the next Push then makes event_fd() readable.
// Tests declare their CQs before the loop: the loop polls them until it stops.
class FakeCq : public verbs::CompletionQueue {
 public:
  FakeCq() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) { depth_ = 1024; }
  ~FakeCq() override { close(fd_); }

  int Poll(verbs::Completion* out, int max) override {
    absl::MutexLock l(&mu_);
    ++polls_;
    if (failed_) return -1;
    int n = 0;
    while (n < max && !queue_.empty()) {
      out[n++] = queue_.front();
      queue_.pop_front();
    }
    return n;
  }
  int event_fd() const override { return fd_; }
  absl::Status RequestNotify() override {
    absl::MutexLock l(&mu_);
    armed_ = true;
    ++arms_;
    return absl::OkStatus();
  }
  void ConsumeEvents() override {
    uint64_t v;
    while (read(fd_, &v, sizeof(v)) > 0) {
    }
    consumed_.fetch_add(1);
  }

  void Push(uint64_t wr_id) {
    absl::MutexLock l(&mu_);
    verbs::Completion c;
    c.wr_id = wr_id;
    c.status = verbs::WcStatus::kSuccess;
    c.opcode = verbs::WcOpcode::kRecv;
    queue_.push_back(c);
    if (armed_) {
      armed_ = false;
      const uint64_t one = 1;
      (void)!write(fd_, &one, sizeof(one));
    }
  }
  void Fail() {
    absl::MutexLock l(&mu_);
    failed_ = true;
  }
  int arms() {
    absl::MutexLock l(&mu_);
    return arms_;
  }
  bool armed() {
    absl::MutexLock l(&mu_);
    return armed_;
  }
  int polls() {
    absl::MutexLock l(&mu_);
    return polls_;
  }
  int consumed() const { return consumed_.load(); }

 private:
  const int fd_;
  absl::Mutex mu_;
  std::deque<verbs::Completion> queue_ ABSL_GUARDED_BY(mu_);
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  int arms_ ABSL_GUARDED_BY(mu_) = 0;
  int polls_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> consumed_{0};
};

// A client that records what the loop hands it. Its side channel is one end of a Unix
// socket pair; the test holds the other (peer_fd()).
class Client : public LoopClient {
 public:
  explicit Client(verbs::CompletionQueue* cq, std::atomic<int>* destroyed = nullptr)
      : cq_(cq), destroyed_(destroyed) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    side_fd_ = sv[0];
    peer_fd_ = sv[1];
  }
  ~Client() override {
    if (side_fd_ >= 0) close(side_fd_);
    ClosePeer();
    if (destroyed_ != nullptr) destroyed_->fetch_add(1);
  }

  verbs::CompletionQueue* loop_cq() override { return cq_; }
  int loop_side_fd() override { return side_fd_; }
  bool OnCompletions(const verbs::Completion* wc, int n) override {
    absl::MutexLock l(&mu_);
    for (int i = 0; i < n; ++i) completions_.push_back(wc[i]);
    if (loop_ != nullptr && !loop_->on_loop_thread()) off_loop_thread_ = true;
    return false;
  }
  void OnCqError() override { cq_errors_.fetch_add(1); }
  void OnSideReadable() override {
    char buf[256];
    ssize_t n;
    while ((n = read(side_fd_, buf, sizeof(buf))) > 0) {
      absl::MutexLock l(&mu_);
      side_bytes_.append(buf, static_cast<size_t>(n));
    }
    if (n == 0) {
      side_eof_.store(true);
      // Level-triggered: stop watching a closed socket, as a real client retires itself.
      if (loop_ != nullptr) loop_->Remove(this);
    }
    side_readable_.fetch_add(1);
  }
  bool OnPoll() override {
    polls_.fetch_add(1);
    const uint64_t w = word_.load();
    if (w != seen_word_) {
      seen_word_ = w;
      words_found_.fetch_add(1);
      return true;
    }
    return false;
  }
  bool awaiting() const override { return awaiting_.load(); }

  void set_loop(EventLoop* loop) { loop_ = loop; }
  void ClosePeer() {
    if (peer_fd_ >= 0) close(peer_fd_);
    peer_fd_ = -1;
  }
  int peer_fd() const { return peer_fd_; }
  void set_side_fd_for_test(int fd) { side_fd_ = fd; }
  std::vector<uint64_t> wr_ids() {
    absl::MutexLock l(&mu_);
    std::vector<uint64_t> out;
    for (const auto& c : completions_) out.push_back(c.wr_id);
    return out;
  }
  std::vector<verbs::Completion> completions() {
    absl::MutexLock l(&mu_);
    return completions_;
  }
  size_t completion_count() {
    absl::MutexLock l(&mu_);
    return completions_.size();
  }
  bool off_loop_thread() {
    absl::MutexLock l(&mu_);
    return off_loop_thread_;
  }
  std::string side_bytes() {
    absl::MutexLock l(&mu_);
    return side_bytes_;
  }

  std::atomic<int> cq_errors_{0};
  std::atomic<int> side_readable_{0};
  std::atomic<bool> side_eof_{false};
  std::atomic<int> polls_{0};
  std::atomic<uint64_t> word_{0};  // "memory the peer writes one-sidedly"
  std::atomic<int> words_found_{0};
  std::atomic<bool> awaiting_{false};

 private:
  verbs::CompletionQueue* cq_;
  std::atomic<int>* destroyed_;
  EventLoop* loop_ = nullptr;
  int side_fd_ = -1;
  int peer_fd_ = -1;
  uint64_t seen_word_ = 0;  // loop thread only
  absl::Mutex mu_;
  std::vector<verbs::Completion> completions_ ABSL_GUARDED_BY(mu_);
  bool off_loop_thread_ ABSL_GUARDED_BY(mu_) = false;
  std::string side_bytes_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<EventLoop> MakeLoop(absl::Duration spin = absl::ZeroDuration()) {
  auto loop = EventLoop::Create(spin);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return loop.ok() ? std::move(*loop) : nullptr;
}

TEST(EventLoopTest, EachClientGetsItsOwnCompletionsOnTheLoopThread) {
  FakeCq cq1, cq2;
  auto loop = MakeLoop(absl::Milliseconds(1));
  ASSERT_NE(loop, nullptr);
  EXPECT_FALSE(loop->on_loop_thread());
  auto c1 = std::make_shared<Client>(&cq1);
  auto c2 = std::make_shared<Client>(&cq2);
  c1->set_loop(loop.get());
  c2->set_loop(loop.get());
  ASSERT_TRUE(loop->Add(c1).ok());
  ASSERT_TRUE(loop->Add(c2).ok());
  for (uint64_t i = 1; i <= 100; ++i) (i % 3 == 0 ? cq2 : cq1).Push(i);
  ASSERT_TRUE(Eventually([&] { return c1->completion_count() + c2->completion_count() == 100; }))
      << c1->completion_count() << " + " << c2->completion_count();
  std::vector<uint64_t> want1, want2;
  for (uint64_t i = 1; i <= 100; ++i) (i % 3 == 0 ? want2 : want1).push_back(i);
  EXPECT_EQ(c1->wr_ids(), want1) << "in order, each completion once";
  EXPECT_EQ(c2->wr_ids(), want2);
  EXPECT_FALSE(c1->off_loop_thread());
  EXPECT_FALSE(c2->off_loop_thread());
  loop->Stop();
}

// With no spin the loop arms every channel and sleeps; a completion wakes it through the
// channel (ConsumeEvents is called) and is delivered.
TEST(EventLoopTest, ASleepingLoopWakesOnTheCompletionChannel) {
  FakeCq cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto c = std::make_shared<Client>(&cq);
  ASSERT_TRUE(loop->Add(c).ok());
  for (uint64_t i = 1; i <= 3; ++i) {
    // Armed: the loop is about to sleep or asleep, and the Push below signals the channel.
    ASSERT_TRUE(Eventually([&] { return cq.armed(); })) << "the loop never armed the CQ";
    const int consumed = cq.consumed();
    cq.Push(i);
    ASSERT_TRUE(Eventually([&] { return c->completion_count() == i; }));
    EXPECT_TRUE(Eventually([&] { return cq.consumed() > consumed; }))
        << "the channel's event was not consumed";
  }
  EXPECT_EQ(c->wr_ids(), (std::vector<uint64_t>{1, 2, 3}));
}

// Completions pushed before the client is added are found once it is.
TEST(EventLoopTest, AClientAddedLaterIsPolled) {
  FakeCq idle_cq;
  FakeCq cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto idle = std::make_shared<Client>(&idle_cq);
  ASSERT_TRUE(loop->Add(idle).ok());
  ASSERT_TRUE(Eventually([&] { return idle_cq.arms() > 0; }));  // asleep
  cq.Push(7);
  auto c = std::make_shared<Client>(&cq);
  ASSERT_TRUE(loop->Add(c).ok());
  ASSERT_TRUE(Eventually([&] { return c->completion_count() == 1; }));
  EXPECT_EQ(c->wr_ids(), std::vector<uint64_t>{7});
  EXPECT_EQ(idle->completion_count(), 0u);
}

TEST(EventLoopTest, AFailedCqIsReportedToItsClient) {
  FakeCq good_cq, bad_cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto good = std::make_shared<Client>(&good_cq);
  auto bad = std::make_shared<Client>(&bad_cq);
  ASSERT_TRUE(loop->Add(good).ok());
  ASSERT_TRUE(loop->Add(bad).ok());
  bad_cq.Fail();
  good_cq.Push(1);  // wakes the loop
  ASSERT_TRUE(Eventually([&] { return bad->cq_errors_.load() > 0; }));
  ASSERT_TRUE(Eventually([&] { return good->completion_count() == 1; }));
  EXPECT_EQ(good->cq_errors_.load(), 0);
  EXPECT_EQ(bad->completion_count(), 0u);
  loop->Remove(bad.get());
}

TEST(EventLoopTest, SideChannelDataAndEofFireOnSideReadable) {
  FakeCq cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto c = std::make_shared<Client>(&cq);
  c->set_loop(loop.get());
  ASSERT_TRUE(loop->Add(c).ok());
  ASSERT_EQ(write(c->peer_fd(), "close", 5), 5);
  ASSERT_TRUE(Eventually([&] { return c->side_bytes() == "close"; })) << c->side_bytes();
  EXPECT_FALSE(c->side_eof_.load());
  c->ClosePeer();
  ASSERT_TRUE(Eventually([&] { return c->side_eof_.load(); })) << "EOF not reported";
  EXPECT_EQ(cq.polls() > 0, true);
}

TEST(EventLoopTest, WatchedFdRunsItsHandlerUntilUnwatched) {
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  std::atomic<int> fired{0};
  std::atomic<uint64_t> drained{0};
  std::atomic<bool> off_thread{false};
  EventLoop* l = loop.get();
  ASSERT_TRUE(loop->WatchFd(fd, [&] {
                  uint64_t v = 0;
                  if (read(fd, &v, sizeof(v)) == sizeof(v)) drained.fetch_add(v);
                  if (!l->on_loop_thread()) off_thread = true;
                  fired.fetch_add(1);
                }).ok());
  const absl::Status again = loop->WatchFd(fd, [] {});
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  for (uint64_t i = 1; i <= 3; ++i) {
    const uint64_t add = i;
    ASSERT_EQ(write(fd, &add, sizeof(add)), static_cast<ssize_t>(sizeof(add)));
    ASSERT_TRUE(Eventually([&] { return drained.load() == i * (i + 1) / 2; })) << drained.load();
  }
  EXPECT_FALSE(off_thread.load());
  loop->UnwatchFd();
  const int before = fired.load();
  const uint64_t one = 1;
  ASSERT_EQ(write(fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  absl::SleepFor(absl::Milliseconds(250));  // more than one sleep of the loop
  EXPECT_EQ(fired.load(), before) << "the handler ran after UnwatchFd";
  // Another fd may be watched now.
  std::atomic<int> second{0};
  ASSERT_TRUE(loop->WatchFd(fd, [&] {
                  uint64_t v;
                  (void)!read(fd, &v, sizeof(v));
                  second.fetch_add(1);
                }).ok());
  ASSERT_TRUE(Eventually([&] { return second.load() > 0; })) << "still readable: must fire";
  loop->Stop();
  close(fd);
}

TEST(EventLoopTest, TickRunsRepeatedlyOnTheLoopThreadAndCanBeReplaced) {
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  std::atomic<int> ticks{0};
  std::atomic<bool> off_thread{false};
  EventLoop* l = loop.get();
  loop->SetTick(
      [&] {
        if (!l->on_loop_thread()) off_thread = true;
        ticks.fetch_add(1);
      },
      absl::Milliseconds(5));
  ASSERT_TRUE(Eventually([&] { return ticks.load() >= 3; })) << ticks.load();
  EXPECT_FALSE(off_thread.load());
  std::atomic<int> other{0};
  loop->SetTick([&] { other.fetch_add(1); }, absl::Milliseconds(5));
  ASSERT_TRUE(Eventually([&] { return other.load() >= 2; }));
  const int old = ticks.load();
  ASSERT_TRUE(Eventually([&] { return other.load() >= 4; }));
  EXPECT_EQ(ticks.load(), old) << "the replaced tick still runs";
  loop->Stop();
}

// Timers run once each, in time order, on the loop thread, not before they are due, and
// wake a sleeping loop (its sleeps last up to 100 ms; a 5 ms timer must not wait for one).
TEST(EventLoopTest, TimersRunOnceInOrderWhenDueAndWakeASleepingLoop) {
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  absl::SleepFor(absl::Milliseconds(50));  // asleep by now: nothing to drive
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<absl::Duration> late;
  bool off_thread = false;
  EventLoop* l = loop.get();
  const absl::Time t0 = absl::Now();
  for (int i : {3, 1, 2}) {
    const absl::Time due = t0 + absl::Milliseconds(5 * i);
    loop->RunAt(due, [&, i, due] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
      late.push_back(absl::Now() - due);
      if (!l->on_loop_thread()) off_thread = true;
    });
  }
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return order.size() == 3;
  }));
  absl::SleepFor(absl::Milliseconds(30));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(off_thread);
  for (absl::Duration d : late) {
    EXPECT_GE(d, absl::ZeroDuration()) << "ran before it was due";
    // Generous for a loaded machine; a timer left to the next 100 ms wake-up would miss it.
    EXPECT_LT(d, absl::Milliseconds(60)) << "a sleeping loop did not wake for it";
  }
}

// A client awaiting one-sided writes has OnPoll called until it finds them, though no
// completion or fd event ever arrives for them.
TEST(EventLoopTest, OnPollFindsOneSidedWritesWhileAwaiting) {
  FakeCq cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto c = std::make_shared<Client>(&cq);
  c->awaiting_ = true;
  ASSERT_TRUE(loop->Add(c).ok());
  for (uint64_t w = 1; w <= 5; ++w) {
    c->word_ = w;
    ASSERT_TRUE(Eventually([&] { return c->words_found_.load() == static_cast<int>(w); }))
        << "write " << w << " not found";
  }
  EXPECT_GT(c->polls_.load(), 5);
}

TEST(EventLoopTest, RemovedClientIsReleasedAndNoLongerDriven) {
  FakeCq cq, other_cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  std::atomic<int> destroyed{0};
  auto other = std::make_shared<Client>(&other_cq);
  ASSERT_TRUE(loop->Add(other).ok());
  auto c = std::make_shared<Client>(&cq, &destroyed);
  ASSERT_TRUE(loop->Add(c).ok());
  cq.Push(1);
  ASSERT_TRUE(Eventually([&] { return c->completion_count() == 1; }));
  std::weak_ptr<Client> weak = c;
  Client* raw = c.get();
  c.reset();
  EXPECT_EQ(destroyed.load(), 0) << "the loop keeps an added client alive";
  loop->Remove(raw);
  other_cq.Push(2);  // wakes the loop, which drops its last reference
  ASSERT_TRUE(Eventually([&] { return weak.expired(); })) << "the loop still holds the client";
  EXPECT_EQ(destroyed.load(), 1);
  ASSERT_TRUE(Eventually([&] { return other->completion_count() == 1; }));
  loop->Remove(raw);  // unknown now: no-op
}

// The loop drops a removed client's last reference outside its lock, so the client's
// destructor may call the loop. (A Dialer held the last reference to its connection, whose
// destructor takes the connection's lock -- held elsewhere while setting the loop's timers:
// under ASan, Abseil's deadlock detector aborted replication_test and client_e2e_test on
// that cycle. Before the fix this destructor deadlocks on the loop's lock.)
TEST(EventLoopTest, AClientTheLoopDropsIsDestroyedOutsideTheLoopsLock) {
  FakeCq cq, other_cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  std::atomic<int> destroyed{0};
  std::atomic<bool> timer_ran{false};
  class CallingBack : public Client {
   public:
    CallingBack(verbs::CompletionQueue* cq, std::atomic<int>* destroyed, EventLoop* loop,
                std::atomic<bool>* ran)
        : Client(cq, destroyed), loop_(loop), ran_(ran) {}
    ~CallingBack() override { loop_->RunAt(absl::Now(), [r = ran_] { r->store(true); }); }

   private:
    EventLoop* loop_;
    std::atomic<bool>* ran_;
  };
  auto other = std::make_shared<Client>(&other_cq);
  ASSERT_TRUE(loop->Add(other).ok());
  auto c = std::make_shared<CallingBack>(&cq, &destroyed, loop.get(), &timer_ran);
  ASSERT_TRUE(loop->Add(c).ok());
  cq.Push(1);
  ASSERT_TRUE(Eventually([&] { return c->completion_count() == 1; }));  // the loop holds it
  Client* raw = c.get();
  c.reset();
  loop->Remove(raw);
  other_cq.Push(2);  // wakes the loop, which drops its last reference
  ASSERT_TRUE(Eventually([&] { return timer_ran.load(); }))
      << "the client's destructor could not set a timer: it ran under the loop's lock";
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(EventLoopTest, StopJoinsAndReleasesEveryClient) {
  FakeCq cqs[3];
  auto loop = MakeLoop(absl::Milliseconds(5));
  ASSERT_NE(loop, nullptr);
  std::atomic<int> destroyed{0};
  std::atomic<int> ticks{0};
  loop->SetTick([&] { ticks.fetch_add(1); }, absl::Milliseconds(1));
  std::vector<std::weak_ptr<Client>> weak;
  for (FakeCq& cq : cqs) {
    auto c = std::make_shared<Client>(&cq, &destroyed);
    weak.push_back(c);
    ASSERT_TRUE(loop->Add(std::move(c)).ok());
    cq.Push(1);
  }
  ASSERT_TRUE(Eventually([&] { return ticks.load() > 0; }));
  loop->Stop();
  EXPECT_EQ(destroyed.load(), 3) << "Stop drops the clients";
  for (auto& w : weak) EXPECT_TRUE(w.expired());
  const int ticks_after = ticks.load();
  int polls[3];
  for (int i = 0; i < 3; ++i) polls[i] = cqs[i].polls();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(ticks.load(), ticks_after) << "nothing runs after Stop";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cqs[i].polls(), polls[i]);
  loop->Stop();  // again: no-op
  loop.reset();  // the destructor after Stop
}

std::unique_ptr<EventLoop> MakeShared(absl::Duration spin) {
  auto loop = EventLoop::CreateShared(spin);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return loop.ok() ? std::move(*loop) : nullptr;
}

// Two shares of the process's loop (two messengers) are driven by one thread: each
// client gets its own completions, on that thread; shares with other spin settings get
// another thread.
TEST(EventLoopTest, SharesWithTheSameSettingsAreDrivenByOneThread) {
  FakeCq cq1, cq2, cq3;
  auto a = MakeShared(absl::Microseconds(7));
  auto b = MakeShared(absl::Microseconds(7));
  auto other = MakeShared(absl::Microseconds(8));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(other, nullptr);
  auto c1 = std::make_shared<Client>(&cq1);
  auto c2 = std::make_shared<Client>(&cq2);
  auto c3 = std::make_shared<Client>(&cq3);
  c1->set_loop(b.get());  // a's client checks it runs on b's thread: the same one
  c2->set_loop(a.get());
  c3->set_loop(a.get());  // another thread: off a's loop thread
  ASSERT_TRUE(a->Add(c1).ok());
  ASSERT_TRUE(b->Add(c2).ok());
  ASSERT_TRUE(other->Add(c3).ok());
  cq1.Push(11);
  cq2.Push(21);
  cq3.Push(31);
  ASSERT_TRUE(Eventually([&] {
    return c1->completion_count() == 1 && c2->completion_count() == 1 &&
           c3->completion_count() == 1;
  }));
  EXPECT_EQ(c1->wr_ids(), std::vector<uint64_t>{11});
  EXPECT_EQ(c2->wr_ids(), std::vector<uint64_t>{21});
  EXPECT_FALSE(c1->off_loop_thread()) << "a's client ran off b's loop thread";
  EXPECT_FALSE(c2->off_loop_thread()) << "b's client ran off a's loop thread";
  EXPECT_TRUE(c3->off_loop_thread()) << "other spin settings, same thread";
  a->Stop();
  b->Stop();
  other->Stop();
}

// Stopping one share ends that share alone: its clients are released, its tick and its
// timers never run again (not even one already under way when Stop returns), its watched
// fd is dropped, and the other share's client, tick and timers carry on.
TEST(EventLoopTest, StoppingOneShareLeavesTheOtherRunning) {
  FakeCq cq1, cq2;
  auto a = MakeShared(absl::Microseconds(9));
  auto b = MakeShared(absl::Microseconds(9));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::atomic<int> destroyed{0};
  auto c1 = std::make_shared<Client>(&cq1, &destroyed);
  auto c2 = std::make_shared<Client>(&cq2);
  std::weak_ptr<Client> weak1 = c1;
  ASSERT_TRUE(a->Add(std::move(c1)).ok());
  ASSERT_TRUE(b->Add(c2).ok());
  std::atomic<int> a_ticks{0}, b_ticks{0};
  std::atomic<bool> a_in_tick{false};
  a->SetTick(
      [&] {
        a_in_tick = true;
        absl::SleepFor(absl::Milliseconds(2));  // Stop may come while it runs
        a_ticks.fetch_add(1);
        a_in_tick = false;
      },
      absl::Milliseconds(1));
  b->SetTick([&] { b_ticks.fetch_add(1); }, absl::Milliseconds(1));
  const int fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);  // readable for good
  ASSERT_GE(fd, 0);
  std::atomic<int> a_watched{0};
  ASSERT_TRUE(a->WatchFd(fd, [&] { a_watched.fetch_add(1); }).ok());
  std::atomic<int> a_timer{0}, b_timer{0};
  a->RunAt(absl::Now() + absl::Milliseconds(100), [&] { a_timer.fetch_add(1); });
  b->RunAt(absl::Now() + absl::Milliseconds(100), [&] { b_timer.fetch_add(1); });
  ASSERT_TRUE(Eventually([&] { return a_ticks.load() >= 2 && a_watched.load() >= 2; }));
  a->Stop();
  EXPECT_FALSE(a_in_tick.load()) << "a's tick still ran after its Stop returned";
  EXPECT_EQ(destroyed.load(), 1) << "Stop releases the share's clients";
  EXPECT_TRUE(weak1.expired());
  const int ticks_after = a_ticks.load();
  const int watched_after = a_watched.load();
  cq2.Push(5);
  ASSERT_TRUE(Eventually([&] { return c2->completion_count() == 1; }))
      << "the other share's client is no longer driven";
  ASSERT_TRUE(Eventually([&] { return b_timer.load() == 1; }));
  const int b_ticks_now = b_ticks.load();
  ASSERT_TRUE(Eventually([&] { return b_ticks.load() >= b_ticks_now + 3; }));
  EXPECT_EQ(a_ticks.load(), ticks_after);
  EXPECT_EQ(a_watched.load(), watched_after);
  EXPECT_EQ(a_timer.load(), 0) << "a timer of a stopped share ran";
  EXPECT_FALSE(a->Add(std::make_shared<Client>(&cq1)).ok()) << "Add after Stop";
  b->Stop();
  close(fd);
}

// A failed Add leaves nothing registered: the same client can be added once fixed.
TEST(EventLoopTest, FailedAddLeavesNothingBehind) {
  FakeCq cq;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto c = std::make_shared<Client>(&cq);
  const int good_fd = c->loop_side_fd();
  c->set_side_fd_for_test(-1);
  const absl::Status s = loop->Add(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("side channel"), absl::string_view::npos) << s;
  c->set_side_fd_for_test(good_fd);
  ASSERT_TRUE(loop->Add(c).ok()) << "the CQ's fd was left in the epoll set";
  cq.Push(3);
  ASSERT_TRUE(Eventually([&] { return c->completion_count() == 1; }));
}

// A WatchFd that failed watches nothing: it must not block the next one, and UnwatchFd
// must not later take the failed fd's number -- by then perhaps a client's socket -- out
// of the epoll set.
TEST(EventLoopTest, FailedWatchFdLeavesNothingWatched) {
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  std::atomic<int> wrong{0};
  const absl::Status bad = loop->WatchFd(-1, [&] { wrong.fetch_add(1); });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("watched fd"), absl::string_view::npos) << bad;
  const int fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);  // readable from the start
  ASSERT_GE(fd, 0);
  std::atomic<int> fired{0};
  const absl::Status good = loop->WatchFd(fd, [&] {
    uint64_t v;
    (void)!read(fd, &v, sizeof(v));
    fired.fetch_add(1);
  });
  EXPECT_TRUE(good.ok()) << good;
  if (good.ok()) {
    EXPECT_TRUE(Eventually([&] { return fired.load() > 0; }));
  }
  EXPECT_EQ(wrong.load(), 0);
  loop->Stop();
  close(fd);
}

// The real thing: two soft-provider transports, each driven by the loop, exchange SENDs;
// the receiver's completions carry the bytes, the sender's retire its WRs.
class LoopedTransport : public LoopClient {
 public:
  explicit LoopedTransport(std::shared_ptr<Transport> t) : t_(std::move(t)) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    side_ = sv[0];
    other_ = sv[1];
  }
  ~LoopedTransport() override {
    close(side_);
    close(other_);
  }
  verbs::CompletionQueue* loop_cq() override { return t_->cq(); }
  int loop_side_fd() override { return side_; }
  bool OnCompletions(const verbs::Completion* wc, int n) override {
    for (int i = 0; i < n; ++i) {
      absl::MutexLock l(&mu_);
      if (wc[i].status != verbs::WcStatus::kSuccess) {
        ++errors_;
        continue;
      }
      if (wc[i].wr_id & kRecvWrBit) {
        const uint32_t index = static_cast<uint32_t>(wc[i].wr_id & ~kRecvWrBit);
        SendHeader h;
        if (DecodeSendHeader(t_->recv_buffer(index), wc[i].byte_len, &h).ok()) {
          bodies_.emplace_back(
              reinterpret_cast<const char*>(t_->recv_buffer(index)) + kSendHeaderBytes,
              h.frag_len);
        } else {
          ++errors_;
        }
        (void)t_->RepostRecv(index);
      } else {
        t_->OnSendCompleted(wc[i].wr_id);
      }
    }
    return true;
  }
  void OnCqError() override {
    absl::MutexLock l(&mu_);
    ++errors_;
  }
  void OnSideReadable() override {}

  std::vector<std::string> bodies() {
    absl::MutexLock l(&mu_);
    return bodies_;
  }
  int errors() {
    absl::MutexLock l(&mu_);
    return errors_;
  }
  Transport& transport() { return *t_; }

 private:
  std::shared_ptr<Transport> t_;
  int side_ = -1, other_ = -1;
  absl::Mutex mu_;
  std::vector<std::string> bodies_ ABSL_GUARDED_BY(mu_);
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(EventLoopTest, DrivesSoftTransportsBothWays) {
  auto budget = RegisteredBudget::Create(64 << 20);
  auto ctx_a = testing::OpenSoftContext();
  auto ctx_b = testing::OpenSoftContext();
  ASSERT_TRUE(ctx_a && ctx_b);
  TransportConfig cfg;
  cfg.recv_buffers = 8;
  cfg.send_buffers = 8;
  cfg.buffer_bytes = 4096;
  cfg.sq_depth = 32;
  cfg.signal_every = 1;  // every send completes: the loop retires each one
  auto ta = Transport::Create(ctx_a, cfg, budget.get(), "b");
  auto tb = Transport::Create(ctx_b, cfg, budget.get(), "a");
  ASSERT_TRUE(ta.ok() && tb.ok());
  ASSERT_TRUE((*ta)->PostAllRecvs().ok());
  ASSERT_TRUE((*tb)->PostAllRecvs().ok());
  ASSERT_TRUE((*ta)->qp()->Connect((*tb)->qp()->local_endpoint()).ok());
  ASSERT_TRUE((*tb)->qp()->Connect((*ta)->qp()->local_endpoint()).ok());
  auto a = std::make_shared<LoopedTransport>(*ta);
  auto b = std::make_shared<LoopedTransport>(*tb);
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  ASSERT_TRUE(loop->Add(a).ok());
  ASSERT_TRUE(loop->Add(b).ok());

  // More messages than receive buffers: each arrives only because the loop handed the
  // receive to its client, which re-posted it; each send buffer comes back the same way.
  constexpr int kMessages = 40;
  std::vector<std::string> sent[2];
  for (int i = 0; i < kMessages; ++i) {
    LoopedTransport& from = i % 2 == 0 ? *a : *b;
    LoopedTransport& to = i % 2 == 0 ? *b : *a;
    Transport& t = from.transport();
    const size_t arrived = to.bodies().size();
    int buf = -1;
    ASSERT_TRUE(Eventually([&] { return (buf = t.TakeSendBuffer()) >= 0; }))
        << "send buffers never came back";
    const std::string body = "message " + std::to_string(i) + std::string(i * 50, '.');
    SendHeader h;
    h.kind = SendKind::kFragment;
    h.flags = kSendFirst | kSendLast;
    h.frag_len = static_cast<uint32_t>(body.size());
    h.total_len = h.frag_len;
    h.seq = static_cast<uint64_t>(i + 1);
    EncodeSendHeader(h, t.send_buffer(buf));
    std::memcpy(t.send_buffer(buf) + kSendHeaderBytes, body.data(), body.size());
    WrSpec w;
    w.opcode = verbs::WrOpcode::kSend;
    w.sge = t.SendBufferSge(buf, static_cast<uint32_t>(kSendHeaderBytes + body.size()));
    w.send_buffer = buf;
    ASSERT_TRUE(t.WaitForRoom(1, absl::Now() + kWait));
    ASSERT_TRUE(t.Post({&w, 1}).ok());
    sent[i % 2].push_back(body);
    // One at a time: the receiver re-posts on the loop thread, the sender must not
    // overrun it (the messenger's credits do that job).
    ASSERT_TRUE(Eventually([&] { return to.bodies().size() == arrived + 1; }));
  }
  EXPECT_EQ(b->bodies(), sent[0]);
  EXPECT_EQ(a->bodies(), sent[1]);
  ASSERT_TRUE(Eventually([&] {
    return a->transport().retired() == a->transport().posted() &&
           b->transport().retired() == b->transport().posted();
  }));
  EXPECT_EQ(a->errors(), 0);
  EXPECT_EQ(b->errors(), 0);
  loop->Stop();
}

}  // namespace
}  // namespace msgr::rdma
