#include "msg/rdma/event_loop.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "msg/base/spin_policy.h"
#include "msg/rdma/side_channel.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {
namespace {
constexpr int kPollBatch = 32;
constexpr int kSleepMs = 100;
constexpr absl::Duration kSideCheckInterval = absl::Milliseconds(2);
// Between polls of awaited credit words once the spin is over: short next to a durable
// write, long enough that a waiting client costs a few percent of a core.
constexpr absl::Duration kAwaitNap = absl::Microseconds(50);
// Naps before an awaiting loop arms its clients' wake-ups and sleeps (~1 ms): a durable
// 4 KiB write is acknowledged well inside them, and is latency-bound -- a wake-up on the
// soft HCA cost more than the naps it saves (-25% at durable 4 KiB -t 16 when the loop
// slept after one nap); a loaded OSD is not. Re-measured after wake-ups stopped crossing a
// socket (session 27): 2 naps and 0 naps gave no more IOPS with 20 or 60 clients and
// less at -t 16 (docs/BENCHMARKS.md "Session 27").
constexpr int kAwaitNaps = 20;
// A nap this much longer than kAwaitNap means the thread waited for a CPU.
constexpr absl::Duration kContendedNap = absl::Microseconds(200);  // 4x kAwaitNap
// How long such a sleep lasts at most (a wake-up lost with a link is found by the next
// look; faults wake the loop through the side channel anyway).
constexpr int kAwaitSleepMs = 20;
// epoll data: pointer to the client, low bit set for its side-channel fd; 0 is the wake
// eventfd; a user's WatchFd fd is its owner id shifted left by 3, with bit 1 set (client
// pointers are 8-byte aligned, so their low three bits are 0 or 1).
constexpr uint64_t kWatchedFdBit = 2;
uint64_t Token(const LoopClient* c, bool side) {
  return reinterpret_cast<uint64_t>(c) | (side ? 1 : 0);
}
uint64_t WatchedToken(uint64_t owner) { return (owner << 3) | kWatchedFdBit; }
}  // namespace

// The thread behind one or more EventLoop shares. Everything a share registers carries its
// owner id, so Detach(owner) ends that share alone.
class LoopThread {
 public:
  static absl::StatusOr<std::shared_ptr<LoopThread>> Start(absl::Duration spin,
                                                           bool adaptive);
  ~LoopThread();  // Stop()

  uint64_t NewOwner() {
    absl::MutexLock l(&mu_);
    const uint64_t owner = next_owner_++;
    live_.insert(owner);
    return owner;
  }
  absl::Status Add(uint64_t owner, std::shared_ptr<LoopClient> c);
  void Remove(const LoopClient* c);
  void SideConnected(const LoopClient* c);
  void RunAt(uint64_t owner, absl::Time when, std::function<void()> fn);
  void SetTick(uint64_t owner, std::function<void()> tick, absl::Duration every);
  absl::Status WatchFd(uint64_t owner, int fd, std::function<void()> on_readable);
  void UnwatchFd(uint64_t owner);
  // Drops everything of `owner` and refuses what it adds later; unless called on the loop
  // thread, returns once no handler of `owner` runs. Idempotent.
  void Detach(uint64_t owner);
  // Ends the thread and drops everything. Idempotent.
  void Stop();
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  uint64_t idle_periods() const { return idle_periods_.load(std::memory_order_relaxed); }
  uint64_t sleeps_at_once() const { return sleeps_at_once_.load(std::memory_order_relaxed); }

 private:
  struct Client {
    std::shared_ptr<LoopClient> client;
    uint64_t owner;
  };
  struct Tick {
    std::function<void()> fn;
    absl::Duration every;
    absl::Time last;
  };
  struct Watch {
    int fd;
    std::function<void()> fn;
  };
  struct Timer {
    uint64_t owner;
    std::function<void()> fn;
  };
  LoopThread(int epoll_fd, int wake_fd, absl::Duration spin, bool adaptive)
      : epoll_fd_(epoll_fd), wake_fd_(wake_fd), spin_(spin), adaptive_(adaptive) {}
  void Run();
  void Wake();
  void UnwatchLocked(uint64_t owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `c`'s CQ channel and side-channel fd out of the epoll set.
  void UnregisterFdsLocked(LoopClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PollAll(const std::vector<std::shared_ptr<LoopClient>>& clients);
  // Runs the timers due at `now` (outside mu_).
  void RunTimers(absl::Time now);
  // Asks every awaiting client for a wake-up (LoopClient::ArmWakeup); true if all got one.
  static bool ArmWakeups(const std::vector<std::shared_ptr<LoopClient>>& clients);

  const int epoll_fd_;
  const int wake_fd_;
  const absl::Duration spin_;
  const bool adaptive_;
  std::atomic<uint64_t> idle_periods_{0};
  std::atomic<uint64_t> sleeps_at_once_{0};
  absl::Mutex mu_;
  std::map<const LoopClient*, Client> clients_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;  // rounds begun
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The shares not yet detached: what a detached one adds later is refused, not driven for
  // good (ids are never reused).
  uint64_t next_owner_ ABSL_GUARDED_BY(mu_) = 1;
  std::set<uint64_t> live_ ABSL_GUARDED_BY(mu_);
  // The process that started the thread: a forked child has the bookkeeping but neither
  // the thread nor an epoll set of its own (it shares the parent's).
  const pid_t pid_ = getpid();
  std::map<uint64_t, Tick> ticks_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Watch> watched_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, Timer> timers_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

absl::StatusOr<std::shared_ptr<LoopThread>> LoopThread::Start(absl::Duration spin,
                                                               bool adaptive) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return ErrnoStatus(errno, "epoll_create1");
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(ep);
    return ErrnoStatus(errno, "eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
  std::shared_ptr<LoopThread> loop(new LoopThread(ep, wake, spin, adaptive));
  loop->thread_ = std::thread([l = loop.get()] {
    pthread_setname_np(pthread_self(), "ms-rdma-cq");
    l->Run();
  });
  return loop;
}

LoopThread::~LoopThread() {
  Stop();
  close(epoll_fd_);
  close(wake_fd_);
}

absl::Status LoopThread::Add(uint64_t owner, std::shared_ptr<LoopClient> c) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = Token(c.get(), false);
  verbs::CompletionQueue* cq = c->loop_cq();
  if (cq != nullptr && epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, cq->event_fd(), &ev) != 0) {
    return ErrnoStatus(errno, "epoll_ctl(cq)");
  }
  ev.events = EPOLLIN | EPOLLRDHUP | (c->side_connecting() ? uint32_t{EPOLLOUT} : 0u);
  ev.data.u64 = Token(c.get(), true);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->loop_side_fd(), &ev) != 0) {
    if (cq != nullptr) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, cq->event_fd(), nullptr);
    return ErrnoStatus(errno, "epoll_ctl(side channel)");
  }
  {
    absl::MutexLock l(&mu_);
    if (live_.count(owner) == 0) {
      UnregisterFdsLocked(c.get());
      return absl::FailedPreconditionError("the event loop is stopped");
    }
    LoopClient* key = c.get();
    clients_[key] = Client{std::move(c), owner};
    ++version_;
  }
  Wake();
  return absl::OkStatus();
}

void LoopThread::Remove(const LoopClient* c) {
  std::shared_ptr<LoopClient> keep;
  {
    absl::MutexLock l(&mu_);
    auto it = clients_.find(c);
    if (it == clients_.end()) return;
    keep = std::move(it->second.client);
    clients_.erase(it);
    ++version_;
    UnregisterFdsLocked(keep.get());
  }
  // `keep` may be the last reference: the client is destroyed outside the lock.
}

void LoopThread::UnregisterFdsLocked(LoopClient* c) {
  if (c->loop_cq() != nullptr) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->loop_cq()->event_fd(), nullptr);
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->loop_side_fd(), nullptr);
}

void LoopThread::Detach(uint64_t owner) {
  const bool forked = getpid() != pid_;
  // Released outside the lock: a client's or a timer's last reference may be ours.
  std::vector<std::shared_ptr<LoopClient>> drop;
  std::vector<std::function<void()>> timers;
  uint64_t round;
  {
    absl::MutexLock l(&mu_);
    if (live_.erase(owner) == 0) return;  // detached already
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->second.owner != owner) {
        ++it;
        continue;
      }
      // A forked child's epoll set is the parent's: deleting would remove the parent's fds.
      if (!forked) UnregisterFdsLocked(it->second.client.get());
      drop.push_back(std::move(it->second.client));
      it = clients_.erase(it);
      ++version_;
    }
    for (auto it = timers_.begin(); it != timers_.end();) {
      if (it->second.owner == owner) {
        timers.push_back(std::move(it->second.fn));
        it = timers_.erase(it);
      } else {
        ++it;
      }
    }
    ticks_.erase(owner);
    if (forked) {
      watched_.erase(owner);
    } else {
      UnwatchLocked(owner);
    }
    round = rounds_;
  }
  drop.clear();
  timers.clear();
  if (forked || on_loop_thread() || !thread_.joinable()) return;
  // A round that began before the lock above may still run this owner's handlers (from
  // its copy of the client list, its tick, a due timer), and the next one releases that
  // copy after it begins: wait until the one after has begun. Woken each millisecond: the
  // loop may sleep in between.
  absl::MutexLock l(&mu_);
  auto released = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || rounds_ >= round + 2; };
  while (!released()) {
    Wake();
    mu_.AwaitWithTimeout(absl::Condition(&released), absl::Milliseconds(1));
  }
}

void LoopThread::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  Wake();
  if (thread_.joinable()) {
    if (on_loop_thread()) {
      thread_.detach();  // inside a handler: the loop ends when it returns
    } else if (getpid() != pid_) {
      thread_.detach();  // a forked child: the thread runs in the parent only
    } else {
      thread_.join();
    }
  }
  std::map<const LoopClient*, Client> drop;
  std::multimap<absl::Time, Timer> timers;
  std::map<uint64_t, Tick> ticks;
  std::map<uint64_t, Watch> watched;
  {
    absl::MutexLock l(&mu_);
    drop.swap(clients_);
    timers.swap(timers_);
    ticks.swap(ticks_);
    watched.swap(watched_);
  }
}

void LoopThread::SideConnected(const LoopClient* c) {
  absl::MutexLock l(&mu_);
  if (clients_.count(c) == 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = Token(c, true);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, const_cast<LoopClient*>(c)->loop_side_fd(), &ev);
}

void LoopThread::RunAt(uint64_t owner, absl::Time when, std::function<void()> fn) {
  bool earliest;
  {
    absl::MutexLock l(&mu_);
    if (stop_ || live_.count(owner) == 0) return;
    earliest = timers_.empty() || when < timers_.begin()->first;
    timers_.emplace(when, Timer{owner, std::move(fn)});
  }
  if (earliest && !on_loop_thread()) Wake();  // it may be asleep past `when`
}

void LoopThread::RunTimers(absl::Time now) {
  std::vector<std::function<void()>> due;
  {
    absl::MutexLock l(&mu_);
    while (!timers_.empty() && timers_.begin()->first <= now) {
      due.push_back(std::move(timers_.begin()->second.fn));
      timers_.erase(timers_.begin());
    }
  }
  for (auto& fn : due) fn();
}

void LoopThread::SetTick(uint64_t owner, std::function<void()> tick, absl::Duration every) {
  absl::MutexLock l(&mu_);
  if (live_.count(owner) == 0) return;
  Tick& t = ticks_[owner];
  t.fn = std::move(tick);
  t.every = every;
  t.last = absl::Now();
}

absl::Status LoopThread::WatchFd(uint64_t owner, int fd, std::function<void()> on_readable) {
  // Under the lock, so that a Detach or UnwatchFd cannot come between the entry and the
  // epoll registration (it would leave a level-triggered fd with no handler).
  absl::MutexLock l(&mu_);
  if (live_.count(owner) == 0) return absl::FailedPreconditionError("the event loop is stopped");
  if (watched_.count(owner) != 0) {
    return absl::AlreadyExistsError("the loop already watches an fd for this user");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = WatchedToken(owner);
  // On failure nothing is watched: a later WatchFd may try again, and UnwatchFd must not
  // delete this fd number from the set (it may belong to a client's socket by then).
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return ErrnoStatus(errno, "epoll_ctl(watched fd)");
  }
  watched_[owner] = Watch{fd, std::move(on_readable)};
  return absl::OkStatus();
}

void LoopThread::UnwatchFd(uint64_t owner) {
  absl::MutexLock l(&mu_);
  UnwatchLocked(owner);
}

void LoopThread::UnwatchLocked(uint64_t owner) {
  auto it = watched_.find(owner);
  if (it == watched_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  watched_.erase(it);
}

void LoopThread::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

bool LoopThread::ArmWakeups(const std::vector<std::shared_ptr<LoopClient>>& clients) {
  return std::all_of(clients.begin(), clients.end(),
                     [](const auto& c) { return !c->awaiting() || c->ArmWakeup(); });
}

bool LoopThread::PollAll(const std::vector<std::shared_ptr<LoopClient>>& clients) {
  bool work = false;
  verbs::Completion wc[kPollBatch];
  for (const auto& c : clients) {
    if (c->OnPoll()) work = true;
    if (c->loop_cq() == nullptr) continue;
    const int n = c->loop_cq()->Poll(wc, kPollBatch);
    if (n > 0) {
      if (c->OnCompletions(wc, n)) work = true;
    } else if (n < 0) {
      c->OnCqError();
    }
  }
  return work;
}

void LoopThread::Run() {
  std::vector<std::shared_ptr<LoopClient>> clients;
  uint64_t seen_version = ~0ull;
  absl::Time last_work = absl::Now();
  absl::Time last_side_check = last_work;
  int naps = 0;            // kAwaitNap naps since the last work
  bool contended = false;  // the last nap overslept (kContendedNap)
  // The spin after work: an idle period opens at the first empty round after work and
  // closes with the next work; the policy learns how often it closes within `spin_`.
  const uint64_t spin_ns = static_cast<uint64_t>(absl::ToInt64Nanoseconds(spin_));
  // A sleeping loop is woken by a chain (the peer's WRITE_WITH_IMM, the HCA's completion
  // event, this thread) that costs several of its 20 us spins: spinning pays while one
  // idle period in four ends within it. One client with one op in flight: about half do,
  // so it spins (with the bar at one in two it flapped). Twenty clients with one op each:
  // under one in ten do, so they sleep at once: 1.57x their IOPS, at a 4 KiB -t 1 p50 of
  // 12.0 us instead of 9.9 (docs/BENCHMARKS.md, "Session 21").
  SpinPolicy::Options spin_options{spin_ns, spin_ns, adaptive_};
  spin_options.min_short_permille = 250;
  SpinPolicy spin_policy(spin_options);
  bool idle_open = false;
  bool idle_slept = false;  // the open period napped or slept
  absl::Duration spin_budget = spin_;
  epoll_event evs[64];
  for (;;) {
    std::vector<std::function<void()>> ticks;
    bool timers_due = false;
    const absl::Time now = absl::Now();
    // The clients the loop held until now are released after the lock: the last reference
    // to a removed one may be ours, and its destructor may take other locks (a Dialer's
    // connection takes its own, whose holders set our timers: a lock-order cycle).
    std::vector<std::shared_ptr<LoopClient>> released;
    {
      absl::MutexLock l(&mu_);
      if (stop_) break;
      ++rounds_;
      if (version_ != seen_version) {
        released.swap(clients);
        for (auto& [k, c] : clients_) clients.push_back(c.client);
        seen_version = version_;
      }
      for (auto& [owner, t] : ticks_) {
        if (t.fn && now - t.last >= t.every) {
          ticks.push_back(t.fn);
          t.last = now;
        }
      }
      timers_due = !timers_.empty() && timers_.begin()->first <= now;
    }
    released.clear();
    for (auto& tick : ticks) tick();
    if (timers_due) RunTimers(now);
    int timeout_ms = 0;
    bool awaiting = false;
    const bool work = PollAll(clients);
    if (!work && !idle_open) {
      idle_open = true;
      idle_slept = false;
      const uint64_t budget = spin_policy.BeginIdle();
      spin_budget = absl::Nanoseconds(budget);
      idle_periods_.fetch_add(1, std::memory_order_relaxed);
      if (budget == 0) sleeps_at_once_.fetch_add(1, std::memory_order_relaxed);
    }
    if (work) {
      if (idle_open) {
        spin_policy.EndIdle(static_cast<uint64_t>(absl::ToInt64Nanoseconds(now - last_work)),
                            idle_slept);
        idle_open = false;
      }
      last_work = now;
      naps = 0;
      contended = false;
      if (now - last_side_check < kSideCheckInterval) continue;
    } else if (now - last_work < spin_budget) {
      if (now - last_side_check < kSideCheckInterval) continue;
    } else if ((awaiting = std::any_of(clients.begin(), clients.end(),
                                       [](const auto& c) { return c->awaiting(); })) &&
               !((naps >= kAwaitNaps || contended) && ArmWakeups(clients))) {
      // Awaiting one-sided writes: nap, until the wait is long (or the CPUs contended)
      // and every awaiting client got its peer to raise a completion with the next one.
      ++naps;
      idle_slept = true;
      const absl::Time nap_start = absl::Now();
      absl::SleepFor(kAwaitNap);  // acks arrive as WRITEs: no event would wake us
      // A nap that overslept by far says the CPUs are oversubscribed (many client
      // messengers on one host, spinning pollers): napping on only takes CPU from the
      // threads that would produce the ack. Sleep on the CQ after this one instead.
      contended = absl::Now() - nap_start > kContendedNap;
      if (now - last_side_check < kSideCheckInterval) continue;
    } else {
      // Going to sleep (awaiting clients have asked for a completion with their next
      // ack): arm every channel, then look once more.
      for (const auto& c : clients) {
        if (c->loop_cq() != nullptr) (void)c->loop_cq()->RequestNotify();
      }
      idle_slept = true;
      if (PollAll(clients)) {
        last_work = absl::Now();
        naps = 0;
        contended = false;
        idle_open = false;  // found by the last look before sleeping: no sample
        continue;
      }
      timeout_ms = awaiting ? kAwaitSleepMs : kSleepMs;
      {
        absl::MutexLock l(&mu_);
        if (stop_) break;
        if (version_ != seen_version) continue;
        // Timers added during this round (by a handler on this thread: no wake-up) too.
        if (!timers_.empty()) {
          const absl::Duration next = timers_.begin()->first - absl::Now();
          if (next < absl::Milliseconds(timeout_ms)) {
            timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(
                absl::Ceil(std::max(next, absl::ZeroDuration()), absl::Milliseconds(1))));
          }
        }
      }
    }
    last_side_check = now;
    const int n = epoll_wait(epoll_fd_, evs, 64, timeout_ms);
    {
      absl::MutexLock l(&mu_);
      if (stop_) break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t token = evs[i].data.u64;
      if (token == 0) {
        uint64_t v;
        (void)!read(wake_fd_, &v, sizeof(v));
        continue;
      }
      if ((token & 7) == kWatchedFdBit) {
        std::function<void()> fn;
        {
          absl::MutexLock l(&mu_);
          auto it = watched_.find(token >> 3);
          if (it != watched_.end()) fn = it->second.fn;
        }
        if (fn) fn();
        continue;
      }
      const auto* key = reinterpret_cast<const LoopClient*>(token & ~uint64_t{1});
      std::shared_ptr<LoopClient> c;
      {
        absl::MutexLock l(&mu_);
        auto it = clients_.find(key);
        if (it != clients_.end()) c = it->second.client;
      }
      if (!c) continue;
      if (token & 1) {
        c->OnSideReadable();
      } else if (c->loop_cq() != nullptr) {
        c->loop_cq()->ConsumeEvents();
        last_work = absl::Now();
      }
    }
  }
}

namespace {
// The process's shared loops, one per spin setting, started on first use and kept until
// the process exits (so that no messenger's shutdown ever joins the thread it runs on).
// Keyed by process too: a forked child has none of its parent's threads (a share it
// inherited only drops its bookkeeping when stopped).
struct SharedLoops {
  absl::Mutex mu;
  std::map<std::tuple<pid_t, int64_t, bool>, std::shared_ptr<LoopThread>> loops
      ABSL_GUARDED_BY(mu);
};
SharedLoops& Shared() {
  static auto* s = new SharedLoops;
  return *s;
}
}  // namespace

EventLoop::EventLoop(std::shared_ptr<LoopThread> thread, bool is_private)
    : thread_(std::move(thread)), owner_(thread_->NewOwner()), private_(is_private) {}

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(absl::Duration spin,
                                                              bool adaptive) {
  auto t = LoopThread::Start(spin, adaptive);
  if (!t.ok()) return t.status();
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(*t), /*is_private=*/true));
}

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::CreateShared(absl::Duration spin,
                                                                    bool adaptive) {
  SharedLoops& s = Shared();
  absl::MutexLock l(&s.mu);
  auto& t = s.loops[{getpid(), absl::ToInt64Nanoseconds(spin), adaptive}];
  if (t == nullptr) {
    auto started = LoopThread::Start(spin, adaptive);
    if (!started.ok()) return started.status();
    t = std::move(*started);
  }
  return std::unique_ptr<EventLoop>(new EventLoop(t, /*is_private=*/false));
}

EventLoop::~EventLoop() { Stop(); }

absl::Status EventLoop::Add(std::shared_ptr<LoopClient> c) {
  return thread_->Add(owner_, std::move(c));
}
void EventLoop::Remove(const LoopClient* c) { thread_->Remove(c); }
void EventLoop::Stop() {
  if (private_) thread_->Stop();  // joins the thread: nothing of ours runs after
  thread_->Detach(owner_);        // idempotent; what we add later is refused
}
void EventLoop::SetTick(std::function<void()> tick, absl::Duration every) {
  thread_->SetTick(owner_, std::move(tick), every);
}
void EventLoop::RunAt(absl::Time when, std::function<void()> fn) {
  thread_->RunAt(owner_, when, std::move(fn));
}
void EventLoop::SideConnected(const LoopClient* c) { thread_->SideConnected(c); }
absl::Status EventLoop::WatchFd(int fd, std::function<void()> on_readable) {
  return thread_->WatchFd(owner_, fd, std::move(on_readable));
}
void EventLoop::UnwatchFd() { thread_->UnwatchFd(owner_); }
bool EventLoop::on_loop_thread() const { return thread_->on_loop_thread(); }
uint64_t EventLoop::idle_periods() const { return thread_->idle_periods(); }
uint64_t EventLoop::sleeps_at_once() const { return thread_->sleeps_at_once(); }

}  // namespace msgr::rdma
