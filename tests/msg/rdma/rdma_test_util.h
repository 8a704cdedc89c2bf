// Test helpers for the rdma backend: a recording Dispatcher and a ring drainer that plays
// the OSD poller (RingConsumer + ReleaseRing, optional sleeping on wait_fd()).
#ifndef MSGR_TESTS_MSG_RDMA_RDMA_TEST_UTIL_H_
#define MSGR_TESTS_MSG_RDMA_RDMA_TEST_UTIL_H_

#include <dirent.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "msg/messenger.h"
#include "msg/ring/ring.h"

namespace msgr::rdma::testing {

struct SeenRecord {
  std::string oid;
  std::string payload;
  uint64_t tid = 0;
  uint16_t writer_depth = 0;     // RecordHeader::writer_depth
  bool payload_in_ring = false;  // RecordView.payload pointed into the ring memory
};

class Recorder : public Dispatcher {
 public:
  void OnAccept(const ConnectionRef& c) override {
    absl::MutexLock l(&mu_);
    accepted_.push_back(c);
  }
  void OnRingAttached(const ConnectionRef& c, std::shared_ptr<RecvRing> ring) override {
    absl::MutexLock l(&mu_);
    rings_.push_back({c, ring});
  }
  void OnMessage(const ConnectionRef& c, Message m) override {
    absl::MutexLock l(&mu_);
    messages_.push_back(std::move(m));
    if (echo_) (void)c->Send(messages_.back());
  }
  void OnReset(const ConnectionRef& c, const absl::Status& why) override {
    absl::MutexLock l(&mu_);
    resets_.push_back(why);
  }
  void OnRemoteReset(const ConnectionRef& c) override {
    absl::MutexLock l(&mu_);
    ++remote_resets_;
  }
  void OnConnectRefused(const ConnectionRef& c, const absl::Status& why) override {
    absl::MutexLock l(&mu_);
    refused_.push_back(why);
  }
  void OnRecordsAcked(const ConnectionRef& c, absl::Span<const RecordAck> acks) override {
    absl::MutexLock l(&mu_);
    for (const RecordAck& a : acks) acked_.push_back(a.tid);
  }
  // Record tids acknowledged so far, in the order the acks came.
  std::vector<uint64_t> acked() {
    absl::MutexLock l(&mu_);
    return acked_;
  }
  bool WaitAcks(size_t n, absl::Duration d = absl::Seconds(10)) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return acked_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), d);
  }

  bool WaitMessages(size_t n, absl::Duration d = absl::Seconds(20)) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return messages_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), d);
  }
  bool WaitRings(size_t n, absl::Duration d = absl::Seconds(10)) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return rings_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), d);
  }
  bool WaitRefused(size_t n, absl::Duration d = absl::Seconds(10)) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return refused_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), d);
  }
  std::vector<Message> messages() {
    absl::MutexLock l(&mu_);
    return messages_;
  }
  std::pair<ConnectionRef, std::shared_ptr<RecvRing>> ring(size_t i) {
    absl::MutexLock l(&mu_);
    return rings_.at(i);
  }
  size_t rings() {
    absl::MutexLock l(&mu_);
    return rings_.size();
  }
  size_t accepted() {
    absl::MutexLock l(&mu_);
    return accepted_.size();
  }
  std::vector<absl::Status> refused() {
    absl::MutexLock l(&mu_);
    return refused_;
  }
  std::vector<absl::Status> resets() {
    absl::MutexLock l(&mu_);
    return resets_;
  }
  bool WaitResets(size_t n, absl::Duration d = absl::Seconds(10)) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return resets_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), d);
  }
  int remote_resets() {
    absl::MutexLock l(&mu_);
    return remote_resets_;
  }
  void set_echo(bool e) {
    absl::MutexLock l(&mu_);
    echo_ = e;
  }

 private:
  absl::Mutex mu_;
  bool echo_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ConnectionRef> accepted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<ConnectionRef, std::shared_ptr<RecvRing>>> rings_ ABSL_GUARDED_BY(mu_);
  std::vector<Message> messages_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> resets_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> refused_ ABSL_GUARDED_BY(mu_);
  int remote_resets_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> acked_ ABSL_GUARDED_BY(mu_);
};

// Drains one ring like the OSD poller: spin, then (if `sleep`) drain wait_fd(),
// SetPollerSleeping(true), re-check, and block on wait_fd(). Releases each record after `hold` records are held.
class Drainer {
 public:
  // `paused`: starts paused (set_paused(false) to drain); pausing after the start may
  // race with a pass already under way.
  Drainer(ConnectionRef conn, std::shared_ptr<RecvRing> ring, bool sleep,
          absl::Duration spin = absl::Microseconds(50), bool paused = false)
      : conn_(std::move(conn)), ring_(std::move(ring)), sleep_(sleep), spin_(spin),
        consumer_(ring_->base(), ring_->bytes(), ring_->first_seq()) {
    paused_ = paused;
    thread_ = std::thread([this] { Run(); });
  }
  ~Drainer() {
    Stop();
    close(stop_fd_);
  }
  void Stop() {
    stop_ = true;
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));  // a sleeping drainer wakes at once
    if (thread_.joinable()) thread_.join();
  }
  void set_paused(bool p) { paused_ = p; }
  std::vector<SeenRecord> records() {
    absl::MutexLock l(&mu_);
    return seen_;
  }
  bool WaitRecords(size_t n, absl::Duration d = absl::Seconds(20)) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return seen_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), d);
  }
  int sleeps() const { return sleeps_; }
  // Where the consumer waits and what the seq word there says (racy; for failure output).
  std::string Debug() const {
    const uint64_t pos = consumer_.read_position();
    const uint8_t* slot = ring_->base() + (pos & (ring_->bytes() - 1));
    return "read position " + std::to_string(pos) + " expects seq " +
           std::to_string(consumer_.next_seq()) + ", slot has seq " +
           std::to_string(LoadRecordSeq(slot));
  }
  int wakeups() const { return wakeups_; }
  std::string error() {
    absl::MutexLock l(&mu_);
    return error_;
  }

 private:
  bool PollOnce() {
    bool any = false;
    RecordView v;
    std::string err;
    for (;;) {
      const auto r = consumer_.Next(&v, &err);
      if (r == RingConsumer::Poll::kEmpty) break;
      if (r == RingConsumer::Poll::kCorrupt) {
        absl::MutexLock l(&mu_);
        error_ = err;
        stop_ = true;
        return false;
      }
      any = true;
      const uint8_t* base = ring_->base();
      SeenRecord s;
      s.oid.assign(v.oid, v.header->oid_len);
      s.payload.assign(reinterpret_cast<const char*>(v.payload), v.header->payload_len);
      s.tid = v.header->tid;
      s.writer_depth = v.header->writer_depth;
      s.payload_in_ring = v.payload >= base && v.payload + v.header->payload_len <=
                                                   base + ring_->bytes();
      consumer_.Release(v.end_position);
      conn_->ReleaseRing(v.end_position, {});
      absl::MutexLock l(&mu_);
      seen_.push_back(std::move(s));
    }
    return any;
  }
  void Run() {
    absl::Time idle = absl::Now();
    while (!stop_) {
      if (paused_) {
        absl::SleepFor(absl::Milliseconds(1));
        continue;
      }
      if (PollOnce()) {
        idle = absl::Now();
        continue;
      }
      if (!sleep_ || absl::Now() - idle < spin_) continue;
      // The poller's order (osd_sim/poller.cc): drain the eventfd, announce the sleep,
      // look once more. A doorbell for this sleep then always ends the poll below.
      uint64_t v;
      (void)!read(ring_->wait_fd(), &v, sizeof(v));
      ring_->SetPollerSleeping(true);
      if (PollOnce()) {
        ring_->SetPollerSleeping(false);
        idle = absl::Now();
        continue;
      }
      ++sleeps_;
      pollfd p[2] = {{ring_->wait_fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      // No timeout fallback worth mentioning: a lost wake-up shows as a 10 s stall.
      const int n = poll(p, 2, 10000);
      if (n > 0 && (p[0].revents & POLLIN)) ++wakeups_;
      ring_->SetPollerSleeping(false);
      idle = absl::Now();
    }
  }

  ConnectionRef conn_;
  std::shared_ptr<RecvRing> ring_;
  const bool sleep_;
  const absl::Duration spin_;
  RingConsumer consumer_;
  std::atomic<bool> stop_{false};
  const int stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::atomic<bool> paused_{false};
  std::atomic<int> sleeps_{0}, wakeups_{0};
  absl::Mutex mu_;
  std::vector<SeenRecord> seen_ ABSL_GUARDED_BY(mu_);
  std::string error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Options of an rdma messenger on the soft provider with no authentication (for tests that
// speak raw frames, which carry no proof) and 256 KiB rings.
inline MessengerOptions SoftNoAuthOptions(EntityType type, uint64_t id) {
  MessengerOptions o;
  o.type = "rdma";
  o.name = EntityName{type, id};
  o.auth = AuthConfig::None();
  o.backend_options["rdma_device"] = "soft";
  o.ring_bytes = 256 * 1024;
  return o;
}

// Threads of this process now.
inline int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

}  // namespace msgr::rdma::testing

#endif  // MSGR_TESTS_MSG_RDMA_RDMA_TEST_UTIL_H_
