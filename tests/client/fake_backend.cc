#include "tests/client/fake_backend.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/osd_protocol.h"

namespace msgr::client::testing {
namespace {

// Runs callbacks in order on one thread; drops them after Stop().
class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() { Stop(); }
  void Post(std::function<void()> f) {
    std::lock_guard<std::mutex> l(mu_);
    if (!stopped_) q_.push_back(std::move(f));
    cv_.notify_one();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopped_) return;
      stopped_ = true;
      q_.clear();
      cv_.notify_one();
    }
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // never happens in tests; avoids self-join
    } else {
      thread_.join();
    }
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stopped_ || !q_.empty(); });
      if (stopped_) return;
      auto f = std::move(q_.front());
      q_.pop_front();
      l.unlock();
      f();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool stopped_ = false;
  std::thread thread_;
};

class FakeConnection;

}  // namespace

struct FakeCluster::Osd {
  std::mutex mu;
  bool alive = true;
  bool hold = false;
  bool inline_acks = false;
  bool stall = false;
  absl::Status refuse;
  std::map<std::string, std::string> objects;
  FakeOsdStats stats;
  std::vector<std::pair<std::weak_ptr<Connection>, RecordAck>> held;
  std::vector<std::weak_ptr<Connection>> conns;
};

namespace {

class FakeConnection : public Connection, public std::enable_shared_from_this<FakeConnection> {
 public:
  FakeConnection(std::string addr, std::shared_ptr<Worker> worker, Dispatcher* d)
      : addr_(std::move(addr)), worker_(std::move(worker)), dispatcher_(d) {}

  EntityName peer_name() const override { return EntityName{EntityType::kOsd, 0}; }
  std::string peer_addr() const override { return addr_; }
  bool is_connected() const override { return !down_; }
  size_t max_record_payload() const override {
    return FakeCluster::Get().max_record_payload();
  }
  void ReleaseRing(uint64_t, absl::Span<const RecordAck>) override {}
  void MarkDown() override { down_ = true; }

  absl::Status TrySend(Message m) override { return Send(std::move(m)); }
  absl::Status Send(Message m) override {
    if (down_) return absl::CancelledError("marked down");
    auto o = FakeCluster::Get().Find(addr_);
    if (!o) return absl::OkStatus();
    osd::Reply reply;
    std::lock_guard<std::mutex> l(o->mu);
    if (!o->alive) return absl::OkStatus();  // lost in the dead socket
    auto missing = [&reply] {
      reply.code = absl::StatusCode::kNotFound;
      reply.error = "no such object";
    };
    if (auto req = osd::DecodeReadRequest(m); req.ok()) {
      reply.tid = req->tid;
      auto it = o->objects.find(req->oid);
      if (it == o->objects.end()) {
        missing();
      } else {
        const std::string& d = it->second;
        const size_t off = std::min<uint64_t>(req->offset, d.size());
        reply.data = d.substr(off, std::min<uint64_t>(req->length, d.size() - off));
      }
      Deliver(osd::Encode(reply, osd::kReadReply));
    } else if (auto obj = osd::DecodeObjectRequest(m); obj.ok()) {
      reply.tid = obj->tid;
      auto it = o->objects.find(obj->oid);
      if (it == o->objects.end()) {
        missing();
      } else if (obj->type == osd::kStat) {
        reply.data = osd::EncodeBody(osd::StatBody{it->second.size()});
      } else {
        o->objects.erase(it);
      }
      Deliver(osd::Encode(reply, obj->type == osd::kStat ? osd::kStatReply : osd::kDeleteReply));
    } else if (auto list = osd::DecodeListRequest(m); list.ok()) {
      reply.tid = list->tid;
      osd::ListBody body;  // o->objects is a std::map: already in id order
      for (auto it = o->objects.upper_bound(list->after); it != o->objects.end(); ++it) {
        if (it->first.compare(0, list->prefix.size(), list->prefix) != 0) continue;
        if (body.entries.size() == list->max) {
          body.more = true;
          break;
        }
        body.entries.push_back({it->first, it->second.size()});
      }
      reply.data = osd::EncodeBody(body);
      Deliver(osd::Encode(reply, osd::kListReply));
    }
    return absl::OkStatus();
  }

  absl::Status WriteRecord(const RecordDesc& desc, std::string_view payload,
                           absl::Duration timeout) override {
    if (down_) return absl::CancelledError("marked down");
    if (payload.size() > max_record_payload()) return absl::InvalidArgumentError("too big");
    auto o = FakeCluster::Get().Find(addr_);
    if (!o) return absl::OkStatus();
    const absl::Time until = absl::Now() + timeout;
    for (;;) {
      {
        std::lock_guard<std::mutex> l(o->mu);
        if (!o->stall) break;
      }
      if (down_) return absl::CancelledError("marked down");
      if (absl::Now() >= until) return absl::DeadlineExceededError("no ring credit (stalled)");
      absl::SleepFor(absl::Milliseconds(2));
    }
    RecordAck ack{desc.tid, absl::StatusCode::kOk};
    bool ack_inline = false;
    {
      std::lock_guard<std::mutex> l(o->mu);
      ack_inline = o->inline_acks;
      if (!o->alive) return absl::OkStatus();
      std::string& obj = o->objects[std::string(desc.oid)];
      if (desc.flags & kRecordFlagTruncate) obj.clear();
      if (obj.size() < desc.object_offset + payload.size()) {
        obj.resize(desc.object_offset + payload.size());
      }
      obj.replace(desc.object_offset, payload.size(), payload);
      ++o->stats.records;
      o->stats.flags.push_back(desc.flags);
      o->stats.writer_depths.push_back(desc.writer_depth);
      if (o->hold) {
        o->held.emplace_back(shared_from_this(), std::move(ack));
        ++o->stats.acks_held;
        return absl::OkStatus();
      }
    }
    if (ack_inline) {
      dispatcher_->OnRecordsAcked(shared_from_this(), absl::MakeConstSpan(&ack, 1));
    } else {
      DeliverAck(ack);
    }
    return absl::OkStatus();
  }

  void DeliverAck(RecordAck ack) {
    auto self = shared_from_this();
    worker_->Post([self, ack] {
      if (!self->down_) self->dispatcher_->OnRecordsAcked(self, absl::MakeConstSpan(&ack, 1));
    });
  }

  void Deliver(Message m) {
    auto self = shared_from_this();
    worker_->Post([self, m = std::move(m)]() mutable {
      if (!self->down_) self->dispatcher_->OnMessage(self, std::move(m));
    });
  }
  void RemoteReset() {
    auto self = shared_from_this();
    worker_->Post([self] {
      if (!self->down_) self->dispatcher_->OnRemoteReset(self);
    });
  }

 private:
  const std::string addr_;
  std::shared_ptr<Worker> worker_;
  Dispatcher* dispatcher_;
  std::atomic<bool> down_{false};
};

class FakeMessenger : public Messenger {
 public:
  FakeMessenger(const MessengerOptions& o, Dispatcher* d)
      : options_(o), dispatcher_(d), worker_(std::make_shared<Worker>()) {}
  ~FakeMessenger() override { Shutdown(); }
  absl::StatusOr<std::string> Bind(const std::string&) override {
    return absl::UnimplementedError("fake backend cannot bind");
  }
  absl::StatusOr<ConnectionRef> Connect(const std::string& addr,
                                        const ConnectOptions&) override {
    if (auto hook = FakeCluster::Get().connect_hook()) hook(addr);
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_) return absl::CancelledError("shut down");
    auto c = std::make_shared<FakeConnection>(addr, worker_, dispatcher_);
    if (auto o = FakeCluster::Get().Find(addr)) {
      std::lock_guard<std::mutex> ol(o->mu);
      if (!o->refuse.ok()) {
        o->hold = true;  // a refused session carries nothing
        worker_->Post([d = dispatcher_, c, why = o->refuse] { d->OnConnectRefused(c, why); });
      }
      o->conns.push_back(c);
    }
    conns_.push_back(c);
    return ConnectionRef(c);
  }
  void SetPolicy(EntityType, Policy) override {}
  MessengerCounters counters() const override { return {}; }
  const MessengerOptions& options() const override { return options_; }
  void SetFenced(std::vector<FencedPeer>) override {}  // the fake serves no one
  void Shutdown() override {
    std::vector<std::shared_ptr<FakeConnection>> conns;
    {
      std::lock_guard<std::mutex> l(mu_);
      shutdown_ = true;
      conns.swap(conns_);
    }
    for (auto& c : conns) c->MarkDown();
    worker_->Stop();
  }

 private:
  MessengerOptions options_;
  Dispatcher* dispatcher_;
  std::shared_ptr<Worker> worker_;
  std::mutex mu_;
  bool shutdown_ = false;
  std::vector<std::shared_ptr<FakeConnection>> conns_;
};

}  // namespace

FakeCluster& FakeCluster::Get() {
  static auto* c = new FakeCluster();
  return *c;
}

void FakeCluster::Reset(size_t max_record_payload) {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterMessengerBackend("fake", [](const MessengerOptions& o, Dispatcher* d)
                                         -> absl::StatusOr<std::unique_ptr<Messenger>> {
      return std::unique_ptr<Messenger>(new FakeMessenger(o, d));
    });
  });
  std::lock_guard<std::mutex> l(mu_);
  osds_.clear();
  connect_hook_ = nullptr;
  max_record_payload_ = max_record_payload;
}

void FakeCluster::AddOsd(const std::string& addr) {
  std::lock_guard<std::mutex> l(mu_);
  osds_[addr] = std::make_shared<Osd>();
}

std::shared_ptr<FakeCluster::Osd> FakeCluster::Find(const std::string& addr) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = osds_.find(addr);
  return it == osds_.end() ? nullptr : it->second;
}

void FakeCluster::SetAlive(const std::string& addr, bool alive) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  o->alive = alive;
}

void FakeCluster::HoldAcks(const std::string& addr, bool hold) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  o->hold = hold;
}

void FakeCluster::AckInline(const std::string& addr, bool inline_acks) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  o->inline_acks = inline_acks;
}

void FakeCluster::StallWrites(const std::string& addr, bool stall) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  o->stall = stall;
}

void FakeCluster::SetConnectHook(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> l(mu_);
  connect_hook_ = std::move(hook);
}

std::function<void(const std::string&)> FakeCluster::connect_hook() {
  std::lock_guard<std::mutex> l(mu_);
  return connect_hook_;
}

void FakeCluster::RefuseConnections(const std::string& addr, absl::Status why) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  o->refuse = std::move(why);
}

void FakeCluster::ReleaseAcks(const std::string& addr) {
  auto o = Find(addr);
  std::vector<std::pair<std::weak_ptr<Connection>, RecordAck>> held;
  {
    std::lock_guard<std::mutex> l(o->mu);
    held.swap(o->held);
    o->stats.acks_held = 0;
  }
  for (auto& [weak, ack] : held) {
    if (auto c = weak.lock()) static_cast<FakeConnection*>(c.get())->DeliverAck(ack);
  }
}

void FakeCluster::Restart(const std::string& addr) {
  auto o = Find(addr);
  std::vector<std::weak_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> l(o->mu);
    o->held.clear();
    o->stats.acks_held = 0;
    conns = o->conns;
  }
  for (auto& weak : conns) {
    if (auto c = weak.lock()) static_cast<FakeConnection*>(c.get())->RemoteReset();
  }
}

bool FakeCluster::HasObject(const std::string& addr, const std::string& oid) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  return o->objects.count(oid) > 0;
}

std::string FakeCluster::Object(const std::string& addr, const std::string& oid) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  auto it = o->objects.find(oid);
  return it == o->objects.end() ? "" : it->second;
}

void FakeCluster::SetObject(const std::string& addr, const std::string& oid, std::string data) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  o->objects[oid] = std::move(data);
}

FakeOsdStats FakeCluster::Stats(const std::string& addr) {
  auto o = Find(addr);
  std::lock_guard<std::mutex> l(o->mu);
  return o->stats;
}

}  // namespace msgr::client::testing
