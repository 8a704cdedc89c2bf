// Test helpers for the messenger conformance suite: a recording Dispatcher, a ring
// drainer (a poller thread built on RingConsumer) and a driven messenger's driver. Only msg/messenger.h and the ring
// contract are used, so every backend runs the same tests.
#ifndef MSGR_TESTS_MSG_MESSENGER_TEST_UTIL_H_
#define MSGR_TESTS_MSG_MESSENGER_TEST_UTIL_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "msg/messenger.h"
#include "msg/ring/ring.h"

namespace msgr::testing {

struct DrainedRecord {
  std::string oid;
  uint64_t tid = 0;
  uint64_t object_offset = 0;
  uint64_t client_id = 0;
  std::string payload;
};

// Drains one receive ring on its own thread, like an OSD poller. Records whose oid
// starts with "fail" are released as failed (kResourceExhausted), like a full store.
class RingDrainer {
 public:
  // keep: copy records out for the test to inspect (off for benchmarks: count only).
  RingDrainer(ConnectionRef conn, std::shared_ptr<RecvRing> ring, bool release, bool keep = true)
      : conn_(std::move(conn)), ring_(std::move(ring)), release_(release), keep_(keep) {
    thread_ = std::thread([this] { Run(); });
  }
  ~RingDrainer() {
    stop_ = true;
    thread_.join();
  }
  void SetRelease(bool on) { release_ = on; }
  std::vector<DrainedRecord> Records() {
    std::lock_guard<std::mutex> l(mu_);
    return records_;
  }
  size_t Count() { return count_.load(); }
  std::string Error() {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }

 private:
  void Run() {
    RingConsumer c(ring_->base(), ring_->bytes());
    while (!stop_) {
      RecordView v;
      std::string err;
      switch (c.Next(&v, &err)) {
        case RingConsumer::Poll::kRecord: {
          if (std::string_view(v.oid, v.header->oid_len).substr(0, 4) == "fail") {
            failed_.push_back(RecordAck{v.header->tid, absl::StatusCode::kResourceExhausted});
          }
          if (!keep_) {
            count_++;
            break;
          }
          DrainedRecord r;
          r.oid.assign(v.oid, v.header->oid_len);
          r.tid = v.header->tid;
          r.object_offset = v.header->object_offset;
          r.client_id = v.header->client_id;
          r.payload.assign(reinterpret_cast<const char*>(v.payload), v.header->payload_len);
          std::lock_guard<std::mutex> l(mu_);
          records_.push_back(std::move(r));
          count_++;
          break;
        }
        case RingConsumer::Poll::kCorrupt: {
          std::lock_guard<std::mutex> l(mu_);
          error_ = err;
          return;
        }
        case RingConsumer::Poll::kEmpty: {
          pollfd p{ring_->wait_fd(), POLLIN, 0};
          if (poll(&p, 1, 5) > 0) {
            uint64_t n;
            [[maybe_unused]] ssize_t r = read(ring_->wait_fd(), &n, sizeof(n));
          }
          break;
        }
      }
      if (release_ && c.read_position() > c.released()) {
        c.Release(c.read_position());
        conn_->ReleaseRing(c.read_position(), failed_);
        failed_.clear();
      }
    }
  }

  ConnectionRef conn_;
  std::shared_ptr<RecvRing> ring_;
  std::atomic<bool> release_;
  const bool keep_;
  std::atomic<size_t> count_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<DrainedRecord> records_;
  std::vector<RecordAck> failed_;  // drainer thread only
  std::string error_;
  std::thread thread_;
};

// Records every callback; the optional hook runs on the messenger's worker thread.
class RecordingDispatcher : public Dispatcher {
 public:
  std::function<void(const ConnectionRef&, const Message&)> on_message;
  bool drain_rings = true;
  bool release_rings = true;
  bool keep_records = true;

  void OnAccept(const ConnectionRef& conn) override {
    std::lock_guard<std::mutex> l(mu_);
    accepted.push_back(conn);
    cv_.notify_all();
  }
  void OnRingAttached(const ConnectionRef& conn, std::shared_ptr<RecvRing> ring) override {
    std::lock_guard<std::mutex> l(mu_);
    rings.push_back(ring);
    if (drain_rings)
      drainers.push_back(std::make_unique<RingDrainer>(conn, ring, release_rings, keep_records));
    cv_.notify_all();
  }
  // Records the message before the hook runs: whatever the hook causes (an echo, say)
  // happens after the message is visible in `messages`, so a test that waits for the
  // effect may then read the count without waiting again.
  void OnMessage(const ConnectionRef& conn, Message m) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      messages.push_back(m);
      cv_.notify_all();
    }
    if (on_message) on_message(conn, m);
  }
  void OnReset(const ConnectionRef& conn, const absl::Status& why) override {
    std::lock_guard<std::mutex> l(mu_);
    resets.push_back(why);
    cv_.notify_all();
  }
  void OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks) override {
    std::lock_guard<std::mutex> l(mu_);
    record_acks.insert(record_acks.end(), acks.begin(), acks.end());
    cv_.notify_all();
  }
  void OnRemoteReset(const ConnectionRef& conn) override {
    std::lock_guard<std::mutex> l(mu_);
    remote_resets++;
    cv_.notify_all();
  }
  void OnConnectRefused(const ConnectionRef& conn, const absl::Status& why) override {
    std::lock_guard<std::mutex> l(mu_);
    refused.push_back(why);
    cv_.notify_all();
  }

  // Waits until `pred` (called under the lock) holds; false on timeout.
  bool WaitFor(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, pred);
  }
  template <typename F>
  auto Locked(F f) {
    std::lock_guard<std::mutex> l(mu_);
    return f();
  }
  RingDrainer* drainer(size_t i = 0) {
    std::lock_guard<std::mutex> l(mu_);
    return i < drainers.size() ? drainers[i].get() : nullptr;
  }
  void StopDrainers() {
    std::vector<std::unique_ptr<RingDrainer>> d;
    {
      std::lock_guard<std::mutex> l(mu_);
      d.swap(drainers);
    }
    d.clear();
  }
  ~RecordingDispatcher() override { StopDrainers(); }

  // Guarded by the internal mutex: read them inside WaitFor predicates or Locked().
  std::vector<ConnectionRef> accepted;
  std::vector<std::shared_ptr<RecvRing>> rings;
  std::vector<std::unique_ptr<RingDrainer>> drainers;
  std::vector<Message> messages;
  std::vector<RecordAck> record_acks;  // in delivery order
  std::vector<absl::Status> resets;
  std::vector<absl::Status> refused;
  int remote_resets = 0;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// A messenger in driven mode (MessengerOptions::worker_threads 0) with a thread of its own
// that drives it as an OSD's poller does: Poll() while it finds work, WaitFor() when it
// does not. Lets the conformance suite run every test on a driven messenger ("tcp-driven").
// Shutdown shuts the messenger down while the thread still drives it (its goodbyes need
// the io), then stops the thread; the destructor does both.
class DrivenMessenger : public Messenger {
 public:
  explicit DrivenMessenger(std::unique_ptr<Messenger> inner)
      : inner_(std::move(inner)), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        if (inner_->Poll()) {
          ran_.fetch_add(1);
        } else {
          inner_->WaitFor(wake_fd_, absl::Milliseconds(100));
        }
      }
    });
  }
  ~DrivenMessenger() override {
    Shutdown();
    close(wake_fd_);
  }
  // Poll() calls of the thread that ran something.
  uint64_t polls_that_ran() const { return ran_.load(); }

  absl::StatusOr<std::string> Bind(const std::string& addr) override { return inner_->Bind(addr); }
  absl::StatusOr<ConnectionRef> Connect(const std::string& addr,
                                        const ConnectOptions& options) override {
    return inner_->Connect(addr, options);
  }
  void SetPolicy(EntityType type, Policy policy) override { inner_->SetPolicy(type, policy); }
  RecordBufferRef AllocRecordBuffer(size_t size) override { return inner_->AllocRecordBuffer(size); }
  size_t zero_copy_min_bytes() const override { return inner_->zero_copy_min_bytes(); }
  MessengerCounters counters() const override { return inner_->counters(); }
  std::vector<CounterGroup> perf_counters() const override { return inner_->perf_counters(); }
  const MessengerOptions& options() const override { return inner_->options(); }
  std::vector<SessionInfo> DumpSessions() const override { return inner_->DumpSessions(); }
  void SetFenced(std::vector<FencedPeer> fenced) override { inner_->SetFenced(std::move(fenced)); }
  void Shutdown() override {
    inner_->Shutdown();
    if (!thread_.joinable()) return;
    stop_.store(true);
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }

 private:
  std::unique_ptr<Messenger> inner_;
  const int wake_fd_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> ran_{0};
  std::thread thread_;
};

}  // namespace msgr::testing

#endif  // MSGR_TESTS_MSG_MESSENGER_TEST_UTIL_H_
