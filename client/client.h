// The msgr client library: connect to a cluster; write, read (whole or ranges), stat,
// delete and list objects.
//
//   auto c = Client::Create({.mon_addr = "127.0.0.1:6789", .ms_type = "tcp"});
//   c.value()->Write("obj", std::make_shared<const std::string>(bytes));
//
// Create() connects to the monitor (gRPC), fetches the cluster map and follows WatchMap;
// data goes over the messenger backend chosen by `ms_type` ("tcp" | "rdma"), one lossless
// connection per OSD, writes as receive-ring records. Placement is proto/placement.h,
// the op engine (resends, timeouts, exactly-once completion) client/objecter.h.
//
// Errors from Create(): an unknown or unavailable backend (Messenger::Create's message,
// unchanged), an unreachable monitor (UNAVAILABLE "monitor at H:P unreachable after
// <mon_timeout>: ..." within mon_timeout), bad options (INVALID_ARGUMENT).
// Op errors: see objecter.h (kDeadlineExceeded "write of OID timed out after 30s (osd.2
// down)", OSD errors with their code, kCancelled at shutdown).
//
// Thread-safety: every method may be called from any thread. Callbacks run on messenger
// or client threads (or inline for immediate errors) and must not block; the sync forms
// must not be called from a callback. Over rdma the thread that runs write callbacks is
// shared by every Client of the process (msg/rdma/event_loop.h): a callback that blocks
// stalls them all. REQUIRES: no Client (this one or another) is destroyed from inside a
// callback.
#ifndef MSGR_CLIENT_CLIENT_H_
#define MSGR_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/objecter.h"
#include "client/scrub.h"
#include "msg/messenger.h"
#include "proto/placement.h"

namespace msgr::mon {
class MonClient;
}  // namespace msgr::mon

namespace msgr::client {

struct ClientOptions {
  std::string mon_addr;                         // "host:port" of the monitor (required)
  std::string ms_type = "tcp";                  // messenger backend: "tcp" | "rdma"
  // The pool every op goes to, by name ("" or "default": the default pool). Create()
  // resolves it in the map: NOT_FOUND "no pool 'X' (pools: default, ...)" if it is not there.
  std::string pool;
  // "crc" or "secure" (tcp only: AES-GCM frames, MessengerOptions::ms_mode); the cluster's.
  std::string ms_mode = "crc";
  uint64_t client_id = 0;                       // 0: derived from pid and time
  AuthConfig auth = AuthConfig::None();         // must match the cluster's
  // Mutual TLS to the monitor: the cluster directory whose pki/ holds ca.crt and
  // `mon_entity`'s certificate and key (tools/cluster.sh makes them); empty: no TLS.
  std::string mon_pki_dir;
  std::string mon_entity = "client.admin";
  absl::Duration op_timeout = absl::Seconds(30);
  absl::Duration mon_timeout = absl::Seconds(10);  // connect + every monitor RPC
  size_t max_in_flight = 256;                   // ops submitted, not yet completed
  size_t queue_depth = 0;  // writes usually in flight (ObjecterOptions::queue_depth); 0: unsaid
  bool block_when_full = true;                  // else kResourceExhausted when full
  // Messenger worker threads. One is the fastest for a client with a few OSD connections:
  // a second worker adds hand-offs between threads and competes for the cores the
  // application and the OSDs need (figures: docs/BENCHMARKS.md, "Measurements quoted
  // from source comments").
  int worker_threads = 1;
  size_t max_record_payload = 0;                // cap per ring record (0: the ring's)
  std::map<std::string, std::string> backend_options;  // e.g. {"rdma_device", "soft"}
  // Tests: when set, runs on the map-watch thread with each new map's epoch before the
  // client follows it; it may block, holding the client on its older map meanwhile.
  std::function<void(uint64_t epoch)> map_hook;
};

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();  // Shutdown()
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Writes the whole object, replacing it. `data` must stay unchanged until completion.
  void AsyncWrite(std::string oid, std::shared_ptr<const std::string> data, WriteCallback cb) {
    objecter_->AsyncWrite(std::move(oid), std::move(data), std::move(cb));
  }
  absl::Status Write(std::string oid, std::shared_ptr<const std::string> data) {
    return objecter_->Write(std::move(oid), std::move(data));
  }
  absl::Status Write(std::string oid, std::string data) {
    return Write(std::move(oid), std::make_shared<const std::string>(std::move(data)));
  }
  // Zero-copy writes: memory the messenger sends from as it is (rdma: registered with the
  // HCA once, when made, and reused after it is let go), for the application to fill.
  // AsyncWrite of such a buffer writes its size() bytes without the client copying them;
  // keep the bytes unchanged until the callback, then reuse or drop the buffer. Never
  // fails: past the registered budget the buffer is plain memory (its writes are copied).
  RecordBufferRef AllocBuffer(size_t size) { return objecter_->AllocBuffer(size); }
  void AsyncWrite(std::string oid, RecordBufferRef data, WriteCallback cb) {
    objecter_->AsyncWrite(std::move(oid), std::move(data), std::move(cb));
  }
  absl::Status Write(std::string oid, RecordBufferRef data) {
    return objecter_->Write(std::move(oid), std::move(data));
  }
  void AsyncRead(std::string oid, ReadCallback cb) {
    objecter_->AsyncRead(std::move(oid), std::move(cb));
  }
  absl::StatusOr<std::string> Read(std::string oid) { return objecter_->Read(std::move(oid)); }
  // Bytes [offset, offset + length) of the object, cut at its end: how objects larger than
  // one reply (MessengerOptions::max_message_bytes) are read.
  absl::StatusOr<std::string> Read(std::string oid, uint64_t offset, uint64_t length);
  void AsyncRead(std::string oid, uint64_t offset, uint64_t length, ReadCallback cb);
  // The object's size; kNotFound "stat of OID on osd.N: object 'OID' not found".
  absl::StatusOr<uint64_t> Stat(std::string oid);
  // Deletes the object; OK once the delete is durable. kNotFound if there is none.
  absl::Status Delete(std::string oid);

  struct ObjectInfo {
    std::string oid;
    uint64_t size = 0;
  };
  // Every object whose id starts with `prefix`, sorted by id: pages from every OSD that
  // holds PGs. Fails (naming the OSD) if one of them does not answer within op_timeout:
  // a listing is whole or an error.
  absl::StatusOr<std::vector<ObjectInfo>> List(std::string prefix);

  // Compares the copies of every object of the client's pool on every up OSD (sizes and
  // crc32c, read by each OSD) with the placement map: client/scrub.h. Fails if an up OSD
  // does not answer. Meant for a quiet cluster (writes during it show as differences).
  absl::StatusOr<ScrubReport> Scrub();

  // Polling mode (Objecter::Poll): one round of the messenger's completion work on this
  // thread; completions may run inside. For a caller that spins while it waits.
  bool Poll() { return objecter_->Poll(); }

  // Opens a session to every up OSD now and waits until each is ready or `deadline`
  // (Objecter::ConnectAll); ops do not need it: they connect on first use.
  absl::Status ConnectAll(absl::Time deadline) { return objecter_->ConnectAll(deadline); }

  // Stops following the map, then fails pending ops with kCancelled. Idempotent.
  void Shutdown();

  uint64_t map_epoch() const { return objecter_->map_epoch(); }
  uint32_t pool_id() const { return objecter_->pool_id(); }
  ObjecterCounters counters() const { return objecter_->counters(); }
  MessengerCounters messenger_counters() const;
  // Its messenger's perf groups ("messenger", and the backend's own, e.g. "rdma").
  std::vector<CounterGroup> messenger_perf_counters() const;
  const ClientOptions& options() const { return options_; }

 private:
  Client(ClientOptions options, std::unique_ptr<Objecter> objecter);

  const ClientOptions options_;
  std::unique_ptr<Objecter> objecter_;
  std::unique_ptr<mon::MonClient> mon_;  // destroyed (watch stopped) before objecter_
};

}  // namespace msgr::client

#endif  // MSGR_CLIENT_CLIENT_H_
