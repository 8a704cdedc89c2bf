// A fake messenger backend ("fake") with in-process fake OSDs, for testing the client's
// op engine without sockets or the real OSD. A fake OSD applies ring records to an
// in-memory object map (kRecordFlagTruncate replaces the object) and acknowledges each
// record as the ring credit does (Dispatcher::OnRecordsAcked, kOk); it answers
// ReadRequests. Tests kill it (records and requests
// vanish, as into a dead socket), hold its acks, or restart it (its connections get
// OnRemoteReset, as a lossless session to a restarted peer does).
//
// Thread-safety: everything is thread-safe. Dispatcher callbacks run on one worker
// thread per fake messenger, in order.
#ifndef MSGR_TESTS_CLIENT_FAKE_BACKEND_H_
#define MSGR_TESTS_CLIENT_FAKE_BACKEND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "msg/messenger.h"

namespace msgr::client::testing {

struct FakeOsdStats {
  uint64_t records = 0;       // records applied
  uint64_t acks_held = 0;     // acks waiting for ReleaseAcks
  std::vector<uint16_t> flags;  // flags of every record applied, in order
  std::vector<uint16_t> writer_depths;  // RecordDesc::writer_depth of each, in order
};

class FakeCluster {
 public:
  static FakeCluster& Get();
  // Registers the "fake" backend (idempotent) and forgets every OSD.
  void Reset(size_t max_record_payload = 1024);

  void AddOsd(const std::string& addr);
  void SetAlive(const std::string& addr, bool alive);
  void HoldAcks(const std::string& addr, bool hold);
  // Acks of records to `addr` are delivered inside WriteRecord, on the writer's thread,
  // instead of through the worker (no allocation per record in the fake itself).
  void AckInline(const std::string& addr, bool inline_acks);
  // Connections to `addr` fail with `why` (OnConnectRefused, nothing delivered), as a
  // messenger reports a peer that refuses the session; OkStatus() ends it.
  void RefuseConnections(const std::string& addr, absl::Status why);
  void ReleaseAcks(const std::string& addr);
  // While stalled, WriteRecord to `addr` waits as for ring credit that does not come: it
  // returns kDeadlineExceeded when its timeout expires (or at once after MarkDown).
  void StallWrites(const std::string& addr, bool stall);
  // Runs `hook(addr)` inside every Connect, before the connection is returned (nullptr
  // clears it): a test changes the map while a connection is being set up.
  void SetConnectHook(std::function<void(const std::string&)> hook);
  // A new session: every connection to `addr` gets OnRemoteReset; nothing is lost on
  // the fake (its objects persist, like a durable store).
  void Restart(const std::string& addr);

  bool HasObject(const std::string& addr, const std::string& oid);
  std::string Object(const std::string& addr, const std::string& oid);
  // Replaces (or creates) an object behind the client's back (to test verification).
  void SetObject(const std::string& addr, const std::string& oid, std::string data);
  FakeOsdStats Stats(const std::string& addr);

  // Used by the fake connections.
  struct Osd;
  std::shared_ptr<Osd> Find(const std::string& addr);
  size_t max_record_payload() const { return max_record_payload_; }
  std::function<void(const std::string&)> connect_hook();

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Osd>> osds_;
  size_t max_record_payload_ = 1024;
  std::function<void(const std::string&)> connect_hook_;
};

}  // namespace msgr::client::testing

#endif  // MSGR_TESTS_CLIENT_FAKE_BACKEND_H_
