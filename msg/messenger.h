// The messenger contract: what every backend ("tcp", "rdma") implements and what the
// OSD and the client program against. Ceph's model in our own form:
//
//   Messenger   one per process role; binds, accepts, connects; owns the worker threads
//   Connection  a session with one peer; sends messages; carries receive-ring writes
//   Dispatcher  implemented by the owner; told about arriving messages and faults
//
// Two kinds of traffic share a connection:
//   * Messages (Send / Dispatcher::OnMessage): small typed messages for acks, reads,
//     errors. Framed per msg/PROTOCOL.md, crc32c-checked, ordered per connection.
//   * Ring records (WriteRecord / Dispatcher::OnRingAttached): object writes that land
//     straight in the receiver's receive ring (msg/ring/ring_format.h) -- read off the
//     socket into the slot by the TCP backend, placed there by one-sided RDMA WRITEs by
//     the RDMA backend. The receiver's pollers drain the ring and return space with
//     Connection::ReleaseRing(); the sender never writes past the space it was given.
//     Releasing a record also acknowledges it: the sender's Dispatcher::OnRecordsAcked
//     learns each record's verdict from the ring credit itself (no message per record;
//     failures travel as a reserved message that the credit never overtakes, see
//     msg/record_acks.h).
//
// Policies (per peer entity type):
//   lossless  every frame has a sequence number and is acknowledged (piggybacked); after
//             a socket fault the connecting side reconnects and resumes the session, the
//             sender resends what was not acknowledged, the receiver drops duplicates:
//             exactly once, in order, per connection. OnReset only after MarkDown or
//             when the peer restarted (new session: OnRemoteReset).
//   lossy     any fault resets the connection (OnReset); nothing is resent.
//
// Threads: Messenger methods and Connection methods are thread-safe and may be called
// from any thread, including from inside Dispatcher callbacks (there, prefer TrySend to
// Send: see Send). Dispatcher callbacks run
// on the backend's worker threads; callbacks for one connection never run concurrently
// and arrive in order. Callbacks must not block for long (hand work to your own threads).
#ifndef MSGR_MSG_MESSENGER_H_
#define MSGR_MSG_MESSENGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "msg/base/perf_counters.h"
#include "msg/ring/ring_format.h"

namespace msgr {

enum class EntityType : uint8_t { kClient = 1, kOsd = 2, kMon = 3 };

struct EntityName {
  EntityType type = EntityType::kClient;
  uint64_t id = 0;
  std::string ToString() const;  // "client.4", "osd.0"
  bool operator==(const EntityName& o) const { return type == o.type && id == o.id; }
  // ToString's inverse: "client.N", "osd.N" or "mon.N" (N a decimal u64); INVALID_ARGUMENT
  // naming the text otherwise.
  static absl::StatusOr<EntityName> Parse(std::string_view text);
};

struct Policy {
  bool lossless = true;
  static Policy Lossless() { return Policy{true}; }
  static Policy Lossy() { return Policy{false}; }
};

// A message: a 16-bit type chosen by the owner (below kReservedMessageTypes; the
// messenger keeps the types above for itself), and an opaque payload the owner encodes.
// The messenger never interprets the owner's messages.
struct Message {
  uint16_t type = 0;
  std::string payload;
};
inline constexpr uint16_t kReservedMessageTypes = 0xff00;

// The receiver's verdict on one ring record.
struct RecordAck {
  uint64_t tid = 0;                               // RecordDesc::tid
  absl::StatusCode code = absl::StatusCode::kOk;  // kOk: the record is done
};

class EntityCredentials;  // msg/entity_credentials.h

// Authentication of both ends during the handshake (msg/PROTOCOL.md, "Handshake"): an
// HMAC-SHA256 challenge-response over the shared cluster secret proves a peer belongs to
// the cluster; with `entity` set, each side also signs the handshake with its entity's
// certificate key, so a peer proves *which* entity it is (an OSD only as itself).
struct AuthConfig {
  enum class Mode { kNone, kSecret };
  Mode mode = Mode::kSecret;
  std::string secret;  // REQUIRES: non-empty when mode == kSecret
  // Our certificate and the cluster CA (EntityCredentials::FromClusterDir). When set
  // (REQUIRES mode == kSecret), peers must prove their entity too or are refused; when
  // unset, a peer that offers a proof is refused (both ends of a cluster run one way).
  std::shared_ptr<const EntityCredentials> entity;
  // Reads a keyring file: one line "key = <base64 or hex or raw secret>".
  static absl::StatusOr<AuthConfig> FromKeyringFile(const std::string& path);
  static AuthConfig None() { return AuthConfig{Mode::kNone, ""}; }
};

struct MessengerOptions {
  std::string type = "tcp";          // backend: "tcp" or "rdma"
  EntityName name;                   // who we are
  // This messenger's incarnation, sent in every handshake it starts: what the cluster
  // fences (SetFenced). 0: Create draws a random one (a restarted process gets another).
  uint64_t instance = 0;
  AuthConfig auth;
  // The backend's own threads; 0: driven mode (Messenger::driven(), tcp only).
  int worker_threads = 2;

  // Protection of the frames after the handshake, per cluster (msg/PROTOCOL.md, "Secure
  // mode"): "crc" (crc32c against corruption only; the default, as before) or "secure"
  // (every frame encrypted and authenticated with AES-GCM under keys derived in the
  // handshake, like msgr2's secure mode). Both ends must use the same mode (and cipher),
  // else the handshake is refused naming both. "secure" needs auth kSecret (its keys come
  // from the cluster key) and the tcp backend (Create refuses it for rdma).
  std::string ms_mode = "crc";
  // The AEAD of "secure": "aes-128-gcm" (default) or "aes-256-gcm".
  std::string ms_secure_cipher = "aes-128-gcm";

  // Flow control: a sender over either limit waits (Send) or gets
  // kResourceExhausted (TrySend). Memory stays bounded whatever the peer does.
  uint64_t conn_max_bytes_in_flight = 64ull << 20;
  uint64_t conn_max_msgs_in_flight = 4096;
  uint64_t messenger_max_bytes_in_flight = 512ull << 20;

  uint32_t max_message_bytes = 128u << 20;   // frames above this are a protocol error
  absl::Duration keepalive_interval = absl::Seconds(2);
  absl::Duration keepalive_timeout = absl::Seconds(10);  // silent peer is reset
  absl::Duration handshake_timeout = absl::Seconds(5);
  // Server side of a lossless session whose peer is gone: how long it waits for the peer
  // to reconnect and resume before it ends the session (OnReset; the ring and its memory
  // are freed). A peer that comes back later finds a new session (OnRemoteReset on its
  // side), as after a restart of this process.
  absl::Duration session_reconnect_timeout = absl::Seconds(120);
  absl::Duration reconnect_backoff_max = absl::Seconds(2);

  // Receive rings this messenger creates for accepted peers that ask for one.
  size_t ring_bytes = kDefaultRingBytes;

  // Fault injection (like Ceph's ms_inject_socket_failures): break the socket after
  // every N frames sent (0 = off).
  uint32_t inject_socket_failures = 0;

  // Backend-specific settings ("rdma_device" -> "soft" | "<ibdev>", ...).
  std::map<std::string, std::string> backend_options;
};

// The counters every backend keeps: listed once here (msg/base/perf_counters.h), giving
// the snapshot MessengerCounters (counters()), the backends' live LiveMessengerCounters
// (msg/messenger_counters.h) and the "messenger" group of perf_counters().
#define MSGR_MESSENGER_COUNTERS(X)                                                        \
  X(msgs_sent, kCounter, kNone, "messages sent (not ring records)")                       \
  X(msgs_received, kCounter, kNone, "messages received and dispatched")                   \
  X(bytes_sent, kCounter, kBytes, "bytes written to the transport, frames and records")   \
  X(bytes_received, kCounter, kBytes, "bytes read from the transport")                    \
  X(records_sent, kCounter, kNone, "ring records sent")                                   \
  X(records_received, kCounter, kNone, "ring records published into receive rings")       \
  X(record_bytes_sent, kCounter, kBytes, "payload bytes of ring records sent")            \
  X(record_bytes_received, kCounter, kBytes, "payload bytes of ring records received")    \
  X(payload_bytes_copied_tx, kCounter, kBytes,                                            \
    "record payload bytes this process's CPU copied sending: into frames or staging "    \
    "buffers, the kernel's socket copy, the soft HCA's memcpy")                           \
  X(record_crc_bytes_tx, kCounter, kBytes,                                                \
    "record payload bytes this process's CPU ran crc32c over sending (0 for records "     \
    "whose crc the caller gave: RecordDesc::payload_crc)")                                \
  X(payload_bytes_copied_rx, kCounter, kBytes,                                            \
    "record payload bytes this process's CPU copied receiving (the kernel's socket copy " \
    "into the ring; 0 for RDMA: the peer's HCA placed them)")                             \
  X(ring_wakeups, kCounter, kNone,                                                        \
    "TCP: receive-ring signals (eventfd writes) made while the ring's poller may sleep; " \
    "an awake poller finds records unsignalled (RDMA: doorbells_received)")               \
  X(resends, kCounter, kNone, "messages and records resent after a reconnect")            \
  X(duplicates_dropped, kCounter, kNone, "resent messages already delivered, dropped")    \
  X(resets, kCounter, kNone, "sessions ended (OnReset)")                                  \
  X(reconnects, kCounter, kNone, "lossless sessions resumed on a new connection")         \
  X(crc_errors, kCounter, kNone, "frames refused for a bad header or payload crc32c")     \
  X(protocol_errors, kCounter, kNone, "connections closed for malformed input")           \
  X(auth_failures, kCounter, kNone, "handshakes refused: wrong key, name or session")     \
  X(fenced_refusals, kCounter, kNone, "handshakes of a fenced (blocklisted) peer refused") \
  X(fenced_sessions_closed, kCounter, kNone, "sessions closed because their peer was fenced") \
  X(secure_auth_failures, kCounter, kNone,                                                \
    "secure mode: frames that failed AES-GCM authentication (tampered, truncated, "       \
    "replayed, reordered); each closed its connection")                                    \
  X(secure_frames_sealed, kCounter, kNone, "secure mode: frames encrypted and sent")       \
  X(secure_frames_opened, kCounter, kNone, "secure mode: frames received and verified")    \
  X(throttle_waits, kCounter, kNone, "sends that waited for the in-flight limits")        \
  X(ring_credit_waits, kCounter, kNone, "record sends that waited for ring space")        \
  X(keepalives_sent, kCounter, kNone, "keepalive frames sent")                            \
  X(connections_open, kGauge, kNone, "connections open now")

MSGR_COUNTER_SNAPSHOT(MessengerCounters, MSGR_MESSENGER_COUNTERS);

class RecvRing;

// One completion source for a poller's rings (issue 17, msg/PROTOCOL.md "Record
// notifications"): instead of looking at every ring it owns, a poller asks its notifier
// which rings have new records, and sleeps on one fd. rdma: a completion queue that takes
// the receive completions of every session placed on it, where each record's seq WRITE
// arrives WITH_IMM; Poll() also runs the backend's handling of the sessions' other
// receives (messages, wake-up requests) on the caller's thread. TCP has none (its reader
// signals each ring's eventfd while the poller may sleep).
//
// Thread-safety: Poll/Arm/wait_fd by the one thread that owns it (a poller); index() any.
class RingNotifier {
 public:
  virtual ~RingNotifier() = default;
  // Which notifier of its messenger this is (0..n-1, MessengerOptions::backend_options
  // "rdma_ring_notifiers"): an OSD puts the rings of notifier i on its poller i % pollers.
  virtual int index() const = 0;
  // Up to `max` rings with new records since the last call, as the RecvRing pointers
  // the poller was given (a ring may appear more than once); their count. Records of a
  // ring that appears here may also have been there before: the poller drains the ring
  // until it is empty, as always.
  virtual size_t Poll(RecvRing** out, size_t max) = 0;
  // The caller is about to sleep: after this returns, the next notification (or one
  // already queued) makes wait_fd() readable. It must Poll() once more before it sleeps.
  virtual void Arm() = 0;
  // Readable once armed and notified; the poller puts it in its epoll set and calls
  // ClearWait() when it found it readable (never read() it: it may not be an eventfd).
  virtual int wait_fd() const = 0;
  virtual void ClearWait() = 0;
};

// A receive ring the messenger created for one peer session. The memory belongs to the
// messenger (it may be registered RDMA memory) and stays valid while this object lives.
class RecvRing {
 public:
  virtual ~RecvRing() = default;
  virtual uint8_t* base() = 0;
  virtual size_t bytes() const = 0;
  // Called by a backend after it published records; wakes a sleeping poller.
  // Pollers block on wait_fd() (an eventfd: readable when new records may exist).
  virtual int wait_fd() const = 0;
  // The poller is about to sleep on wait_fd() (true) or has woken up (false). Backends
  // whose producers cannot signal wait_fd() directly (RDMA: the client writes the ring
  // with no OSD CPU involved) use it to ask the producer for a doorbell while the poller
  // sleeps; TCP's reader signals only then (an awake poller would look anyway). The
  // consumer's side of that bargain: after calling it with true it looks at the ring once
  // more before it blocks (a record published before the producer saw the request is not
  // missed); after calling it with false it looks at the ring on every pass, and never
  // blocks (beyond a bounded nap) without the true-then-look first. One consumer per ring
  // at a time. A consumer that never calls it is signalled for every record. A consumer
  // that runs the producer itself while it sleeps (it drives the messenger: driven(),
  // WaitFor) may not be signalled from its own thread; it looks again when that returns.
  virtual void SetPollerSleeping(bool sleeping) {}
  // True when the producer signals wait_fd() for the records it publishes (TCP: the
  // reader does, while the poller may sleep), so a poller gains nothing by spinning on
  // this ring. False (RDMA) when records appear with no CPU on this side: only polling,
  // or a doorbell, finds them.
  virtual bool producer_signals() const { return true; }
  // The seq of the ring's first record, at position 0: 1 for a new session's ring. A ring
  // that replaces another one of the same session mid-stream (the rdma backend resizes
  // rings) goes on from the old ring's next seq; the poller then carries the session's
  // unfinished writes of several records over from the old ring (msg/PROTOCOL.md, "Ring
  // sizes").
  virtual uint64_t first_seq() const { return 1; }
  // The notifier whose Poll() runs this ring's session's receive completions, or null:
  // the poller that drains this ring must poll it (it owns the ring's session's other
  // traffic too). announced(): every record's arrival is also reported there (or, when
  // the writer ran out of notification credit, soon after), so the poller need not look
  // at this ring otherwise -- a look now and then and before it sleeps stays its safety
  // net. Both are fixed before the ring is handed to the dispatcher.
  virtual RingNotifier* notifier() const { return nullptr; }
  virtual bool announced() const { return false; }
};

class Connection;
using ConnectionRef = std::shared_ptr<Connection>;

// Description of one ring record to write; the messenger fills seq and crcs.
// One ring record. A write too large for one record is several: the first flagged
// kRecordFlagTruncate, the last kRecordFlagLast, consecutive tids (msg/PROTOCOL.md,
// "Writes of several records"; the OSD applies them together).
struct RecordDesc {
  // REQUIRES: 1..kMaxOidBytes bytes. A view: the bytes must stay valid for the WriteRecord
  // call (the messenger copies them into the record). Never a temporary string's
  // (`d.oid = "x" + std::to_string(i)` dangles at once: ASan's stack-use-after-scope).
  std::string_view oid;
  uint64_t tid = 0;
  uint64_t object_offset = 0;
  uint16_t flags = 0;         // kRecordFlag*
  // The record's payload crc32c (over oid then payload: msg/ring/ring_format.h's
  // RecordPayloadCrc) when the caller has it already -- an OSD forwarding a record it
  // received and checked, with the same oid and payload -- so the messenger does not run
  // crc32c over the payload again. The receiver checks it as always: a wrong value gets
  // the record refused as corrupt.
  std::optional<uint32_t> payload_crc;
  // How many other writes the caller has pending to this peer, as it counts them (its
  // application's queue, wherever those writes are at the moment): the record's writer
  // depth (msg/ring/ring_format.h RecordHeader::writer_depth), from which the receiving
  // poller decides whether to spin for the next record or nap. The messenger sends the
  // larger of this and its own count of unacknowledged records on the connection.
  uint16_t writer_depth = 0;
};

// Memory a record payload can be sent from without the messenger copying it
// (Messenger::AllocRecordBuffer). The rdma backend registers it with the HCA once, when it
// is made, so a WriteRecordShared of a payload inside it is read by the HCA from there:
// no staging copy and no registration per write. Every backend takes every payload; a
// buffer only saves work. The owner fills data() and passes the buffer (or a slice of it)
// with the buffer as `owner`; the bytes must not change until the record is acknowledged.
// Dropping the last reference returns the memory to the messenger's pool (it may outlive
// the messenger).
class RecordBuffer {
 public:
  virtual ~RecordBuffer() = default;
  RecordBuffer(const RecordBuffer&) = delete;
  RecordBuffer& operator=(const RecordBuffer&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }  // what was asked for (the memory may be larger)
  std::string_view view() const { return {data_, size_}; }

 protected:
  RecordBuffer(char* data, size_t size) : data_(data), size_(size) {}

 private:
  char* const data_;
  const size_t size_;
};
using RecordBufferRef = std::shared_ptr<RecordBuffer>;

// A RecordBuffer in ordinary heap memory, its bytes undefined until the caller fills them:
// what a backend without registration returns, and what tests use.
RecordBufferRef MakeHeapRecordBuffer(size_t size);

class Connection {
 public:
  virtual ~Connection() = default;

  virtual EntityName peer_name() const = 0;
  virtual std::string peer_addr() const = 0;
  virtual bool is_connected() const = 0;

  // Queues `m` for the peer. Blocks while over the flow-control limits. Returns an
  // error only when the connection is marked down or the messenger is shut down
  // (lossless connections keep queued messages across reconnects). From inside a
  // Dispatcher callback use TrySend: the acks that lift the limits may have to be read by
  // the very thread that is blocked.
  virtual absl::Status Send(Message m) = 0;
  // Like Send but never blocks: kResourceExhausted when over the limits.
  virtual absl::Status TrySend(Message m) = 0;

  // Client side of the ring path. Writes one record of `payload` into the peer's
  // receive ring, waiting up to `timeout` for ring credit (kDeadlineExceeded after
  // that). The payload is copied or sent before this returns; the caller keeps
  // ownership. REQUIRES: the connection was opened with want_ring, payload.size() <=
  // max_record_payload(). Lossless connections resend unacknowledged records after a
  // reconnect, into the same slots.
  virtual absl::Status WriteRecord(const RecordDesc& desc, std::string_view payload,
                                   absl::Duration timeout) = 0;
  // WriteRecord for a payload inside memory that `owner` keeps alive: the backend may keep
  // a reference to `owner` until the record is acknowledged instead of copying the bytes
  // (tcp does: its lossless resend needs them; rdma registers large payloads in place and
  // the HCA reads them from there). The bytes must not change until then. Same contract
  // otherwise.
  virtual absl::Status WriteRecordShared(const RecordDesc& desc, std::string_view payload,
                                         std::shared_ptr<const void> owner,
                                         absl::Duration timeout) {
    return WriteRecord(desc, payload, timeout);
  }
  // Largest payload one record may carry on this connection (0 before the handshake).
  virtual size_t max_record_payload() const = 0;

  // Receiver side of the ring path: every record before ring position `position` is
  // done and its space free again. The backend returns the space to the sender as credit
  // at once (piggybacked on TCP, an 8-byte RDMA WRITE on rdma), and the credit is also the
  // acknowledgement: those records succeeded, except the ones listed in `failed` (tid and
  // code, e.g. kResourceExhausted for a full store). REQUIRES: positions only grow and
  // fall on record boundaries; `failed` names records in the newly released range.
  virtual void ReleaseRing(uint64_t position, absl::Span<const RecordAck> failed) = 0;

  // Closes the connection and discards anything queued; no more callbacks for it
  // after OnReset. Idempotent.
  virtual void MarkDown() = 0;

  // Owner's slot for per-connection state (e.g. the OSD's session); the messenger
  // never touches it.
  std::shared_ptr<void> priv;
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  // A peer connected to us and passed authentication.
  virtual void OnAccept(const ConnectionRef& conn) {}
  // The session to `conn` has a new receive ring (accepting side, peer asked for one).
  // The owner drains it (RingConsumer) and calls conn->ReleaseRing as it frees space.
  // Called again with a fresh ring if the peer starts a new session.
  virtual void OnRingAttached(const ConnectionRef& conn, std::shared_ptr<RecvRing> ring) {}
  // A message arrived. The owner takes the message.
  virtual void OnMessage(const ConnectionRef& conn, Message m) = 0;
  // Sender side of the ring path: the peer released these records, in write order, each
  // with its verdict. Every record of a session is acknowledged exactly once (a resumed
  // session keeps its records; records of a session the peer lost are never acknowledged:
  // OnRemoteReset). May run on a backend's polling thread or inside Messenger::Poll():
  // must be quick and must not block (no Send, no WriteRecord).
  virtual void OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks) {}
  // The connection is gone for good (lossy fault, MarkDown, keepalive timeout,
  // protocol error); `why` says why. Queued messages were dropped.
  virtual void OnReset(const ConnectionRef& conn, const absl::Status& why) = 0;
  // The peer restarted (new session): messages it had not acknowledged are lost on its
  // side, and its ring (if any) is new. Lossless owners resend at their level.
  virtual void OnRemoteReset(const ConnectionRef& conn) {}
  // An outgoing connection could not be established (refused, auth failure, ...).
  // Lossless connections keep retrying with backoff after this.
  virtual void OnConnectRefused(const ConnectionRef& conn, const absl::Status& why) {}
};

// One session of a messenger as DumpSessions() saw it: a copy for diagnostics (the OSD's
// admin socket `dump_sessions`), not a handle; it goes stale at once.
struct SessionInfo {
  EntityName peer;              // who the peer authenticated as (expected, before that)
  // This incarnation of the session: its cookie, a new one each time the connecting
  // messenger starts a session (a restarted peer comes back with another instance).
  uint64_t instance = 0;
  // The peer messenger's incarnation (MessengerOptions::instance) for a session it
  // opened to us; 0 when unknown (our own sessions, a peer that sent none).
  uint64_t peer_instance = 0;
  std::string backend;          // "tcp" | "rdma"
  std::string peer_addr;
  bool outgoing = false;        // we connected (true) or accepted it (false)
  bool lossless = true;
  // "connected"; "connecting" (ours, handshaking or backing off to reconnect); "standby"
  // (accepted lossless session whose peer is gone: kept session_reconnect_timeout for
  // it to resume); "closed" (ending, about to leave the table).
  std::string state;
  uint64_t ring_bytes = 0;       // capacity of this side's receive ring (0: none)
  uint64_t ring_used_bytes = 0;  // of it, records published and not released yet
  uint64_t records_received = 0;  // ring records received on this session so far
  absl::Duration age;             // since the session began
};

// A peer the cluster fenced (Ceph's blocklist): `name`'s messenger incarnation `instance`
// (MessengerOptions::instance, sent in the handshake), or every incarnation when 0.
struct FencedPeer {
  EntityName name;
  uint64_t instance = 0;
  std::string why;  // says who fenced it and when, for the refusal ("blocklisted at epoch 9")
};

// The fencing rule, for a messenger's accept path and for anyone checking a map's list (a
// client or an OSD checking itself, the monitor refusing a boot): OK, or PERMISSION_DENIED
// "NAME (instance X) is fenced: WHY" when an entry matches `peer`'s name, and its instance
// unless that is 0 (every instance).
absl::Status CheckFenced(const std::vector<FencedPeer>& fenced, const EntityName& peer,
                         uint64_t instance);

struct ConnectOptions {
  Policy policy = Policy::Lossless();
  bool want_ring = false;    // ask the peer for a receive ring for WriteRecord
  // The entity the peer must be (the name its CHALLENGE gives, proven by its certificate
  // when the cluster has a PKI): a peer that answers as anyone else is refused with
  // PERMISSION_DENIED (a stale map, or another process on the address). Unset: any.
  std::optional<EntityName> peer;
};

class Messenger {
 public:
  // Creates a backend by name ("tcp", "rdma"). An unknown or unavailable backend gives
  // kInvalidArgument / kUnavailable with a message that says what to do.
  // `dispatcher` must outlive the messenger.
  static absl::StatusOr<std::unique_ptr<Messenger>> Create(const MessengerOptions& options,
                                                           Dispatcher* dispatcher);

  virtual ~Messenger() = default;

  // Starts listening on "host:port" (port 0 picks a free one). Returns the bound address.
  virtual absl::StatusOr<std::string> Bind(const std::string& addr) = 0;

  // Returns the connection to `addr`, creating it (connecting in the background) if
  // needed. Messages sent before the handshake completes are queued.
  virtual absl::StatusOr<ConnectionRef> Connect(const std::string& addr,
                                                const ConnectOptions& options) = 0;

  // Sets the policy for peers of `type` that connect to us.
  virtual void SetPolicy(EntityType type, Policy policy) = 0;

  // Polling mode for a caller that is waiting for acknowledgements and would rather spin
  // than sleep (a futex wake-up costs more than a small write): runs one round of the
  // backend's completion work on the calling thread, delivering whatever has arrived
  // (OnRecordsAcked may run inside). Returns true if it found anything. A backend whose
  // completions only its own threads can reap returns false at once (tcp with socket
  // threads); a driven one (below) runs all of its ready work here.
  virtual bool Poll() { return false; }

  // Driven mode (MessengerOptions::worker_threads 0, a backend that offers it: tcp): the
  // messenger starts no socket thread. One thread of its owner -- an OSD's poller, which
  // then reads the sockets, drains the rings and writes the acks without handing anything
  // to another thread (run to completion) -- runs all of its work (sockets, timers,
  // Dispatcher callbacks) by calling Poll() often, which runs what is ready, and WaitFor()
  // when it has nothing else to do. Only that thread calls them, and it must not block in
  // a way that waits for the messenger (the rule for Dispatcher callbacks applies to it
  // in every call it makes). After Shutdown both return at once (WaitFor as below).
  virtual bool driven() const { return false; }
  // Waits until `fd` is readable, `timeout` passed, or (driven) the messenger ran some of
  // its work on this thread meanwhile; may return early. Not driven: a poll() of `fd`.
  virtual void WaitFor(int fd, absl::Duration timeout);

  // A buffer of `size` bytes to fill with a record payload that this messenger sends
  // without copying (RecordBuffer). Never fails: when the backend cannot register more
  // (rdma: its registered-memory budget), the buffer is plain memory and its writes are
  // copied as any other. Thread-safe. Default: MakeHeapRecordBuffer (tcp sends from any
  // memory it may keep a reference to).
  virtual RecordBufferRef AllocRecordBuffer(size_t size) { return MakeHeapRecordBuffer(size); }
  // The smallest payload outside a RecordBuffer that WriteRecordShared sends from where
  // it lies, keeping `owner` until the HCA is done with it; a smaller one is copied.
  // Default 0: any (tcp keeps a reference for its resend; the kernel's socket copy stays).
  virtual size_t zero_copy_min_bytes() const { return 0; }

  virtual MessengerCounters counters() const = 0;
  // Every counter of this messenger for perf dump and /metrics, backend-neutral: the
  // common ones as the group "messenger", then any group the backend adds ("rdma").
  virtual std::vector<CounterGroup> perf_counters() const {
    return {counters().Group("messenger")};
  }
  virtual const MessengerOptions& options() const = 0;
  // A snapshot of every session this messenger has (accepted and opened), for diagnostics.
  // Any thread, any time: takes the session table's lock and each session's lock briefly,
  // one after the other; the data path pays nothing for it. (rdma: finding the records
  // published in a ring reads their headers, O(records in the ring).)
  virtual std::vector<SessionInfo> DumpSessions() const { return {}; }

  // Replaces the set of fenced peers (the cluster map's blocklist). Every session of a
  // fenced peer that this messenger accepted is closed before this returns (OnReset with
  // PERMISSION_DENIED), its ring's key revoked: a one-sided writer's later writes fail
  // and never land, and the ring's memory is never given to another session. A fenced
  // peer's handshakes are refused with PERMISSION_DENIED naming `why`. Thread-safe; not
  // from a Dispatcher callback (it waits for the sessions' own threads).
  virtual void SetFenced(std::vector<FencedPeer> fenced) = 0;

  // Closes every connection and stops the workers; no callbacks after it returns.
  // Says goodbye first: each open lossless session this messenger opened (Connect) is
  // ended with a CLOSE, so its server frees the session and its ring at once instead of
  // keeping them session_reconnect_timeout for a reconnect that will not come (bounded:
  // about 200 ms in all). Sessions it accepted are just dropped (their clients reconnect
  // to whoever serves them next). Idempotent; the destructor calls it.
  virtual void Shutdown() = 0;
};

// Backends register a factory under their name (see msg/messenger.cc).
using MessengerFactory = std::function<absl::StatusOr<std::unique_ptr<Messenger>>(
    const MessengerOptions&, Dispatcher*)>;
void RegisterMessengerBackend(const std::string& name, MessengerFactory factory);

}  // namespace msgr

#endif  // MSGR_MSG_MESSENGER_H_
