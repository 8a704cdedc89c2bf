// Test doubles for the OSD's ring side: an in-memory receive ring and a connection that
// records what the OSD does to it (acks through ReleaseRing, MarkDown). Shared by the
// poller's unit tests and the OSD's end-to-end tests.
#ifndef MSGR_TESTS_OSD_SIM_RING_FAKES_H_
#define MSGR_TESTS_OSD_SIM_RING_FAKES_H_

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "msg/messenger.h"
#include "msg/ring/ring_format.h"

namespace msgr::osd::fakes {

constexpr size_t kRingBytes = kMinRingBytes;

class TestRing : public RecvRing {
 public:
  TestRing() : mem_(static_cast<uint8_t*>(std::aligned_alloc(kPayloadAlign, kRingBytes))) {
    std::memset(mem_, 0, kRingBytes);
    efd_ = eventfd(0, EFD_NONBLOCK);
  }
  ~TestRing() override {
    close(efd_);
    std::free(mem_);
  }
  uint8_t* base() override { return mem_; }
  size_t bytes() const override { return kRingBytes; }
  int wait_fd() const override { return efd_; }
  void Signal() {
    uint64_t one = 1;
    (void)!write(efd_, &one, sizeof one);
  }

 private:
  uint8_t* mem_;
  int efd_;
};

// Records what the poller does to the connection.
class FakeConnection : public Connection {
 public:
  explicit FakeConnection(uint64_t client_id = 1) : client_id_(client_id) {}
  EntityName peer_name() const override { return {EntityType::kClient, client_id_}; }
  std::string peer_addr() const override { return "127.0.0.1:1"; }
  bool is_connected() const override { return true; }
  absl::Status Send(Message m) override { return TrySend(std::move(m)); }
  absl::Status TrySend(Message m) override { return absl::OkStatus(); }
  absl::Status WriteRecord(const RecordDesc&, std::string_view, absl::Duration) override {
    return absl::UnimplementedError("test");
  }
  size_t max_record_payload() const override { return 0; }
  // What a sender's messenger concludes: every record in the released range is acked,
  // with the code named in `failed` or kOk.
  void ReleaseRing(uint64_t position, absl::Span<const RecordAck> failed) override {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_GT(position, released) << "credits must grow";
    ASSERT_NE(ring, nullptr);
    for (uint64_t pos = released; pos < position;) {
      const auto* h = reinterpret_cast<const RecordHeader*>(ring->base() + pos % ring->bytes());
      ASSERT_GT(h->record_bytes, 0u);
      if (h->type == RecordType::kWrite) {
        absl::StatusCode code = absl::StatusCode::kOk;
        for (const RecordAck& f : failed) {
          if (f.tid == h->tid) code = f.code;
        }
        acked[h->tid] = code;
      }
      pos += h->record_bytes;
    }
    released = position;
  }
  void MarkDown() override { marked_down = true; }

  std::mutex mu;
  RecvRing* ring = nullptr;  // to walk the released records' headers
  std::map<uint64_t, absl::StatusCode> acked;
  uint64_t released = 0;
  std::atomic<bool> marked_down{false};

 private:
  const uint64_t client_id_;
};

}  // namespace msgr::osd::fakes

#endif  // MSGR_TESTS_OSD_SIM_RING_FAKES_H_
