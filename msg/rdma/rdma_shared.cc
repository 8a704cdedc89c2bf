#include "msg/rdma/rdma_shared.h"

namespace msgr::rdma {

MessengerCounters RdmaCounters::Snapshot() const {
  MessengerCounters c;
  c.msgs_sent = msgs_sent;
  c.msgs_received = msgs_received;
  c.bytes_sent = bytes_sent;
  c.bytes_received = bytes_received;
  c.records_sent = records_sent;
  c.records_received = records_received;
  c.record_bytes_sent = record_bytes_sent;
  c.record_bytes_received = record_bytes_received;
  c.resends = resends;
  c.duplicates_dropped = duplicates_dropped;
  c.resets = resets;
  c.reconnects = reconnects;
  c.crc_errors = crc_errors;
  c.protocol_errors = protocol_errors;
  c.auth_failures = auth_failures;
  c.throttle_waits = throttle_waits;
  c.ring_credit_waits = ring_credit_waits;
  c.connections_open = connections_open;
  c.keepalives_sent = keepalives_sent;
  return c;
}

RdmaStats RdmaCounters::Stats() const {
  RdmaStats s;
  s.registered_bytes = registered_bytes;
  s.ring_credit_writes = ring_credit_writes;
  s.ring_credit_messages = ring_credit_messages;
  s.sleep_word_writes = sleep_word_writes;
  s.doorbells_sent = doorbells_sent;
  s.doorbells_received = doorbells_received;
  s.record_payload_bytes_copied_rx = record_payload_bytes_copied_rx;
  s.sends_posted = sends_posted;
  s.recvs_completed = recvs_completed;
  s.control_sends = control_sends;
  s.record_writes_posted = record_writes_posted;
  s.qp_faults = qp_faults;
  return s;
}

Workers::Workers(int threads) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i) queues_.push_back(std::make_unique<Queue>());
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { Run(queues_[i].get()); });
}

Workers::~Workers() { Stop(); }

void Workers::Post(uint64_t key, std::function<void()> fn) {
  Queue* q = queues_[key % queues_.size()].get();
  absl::MutexLock l(&q->mu);
  if (q->stop) return;
  q->q.push_back(std::move(fn));
  q->cv.Signal();
}

void Workers::Stop() {
  for (auto& q : queues_) {
    absl::MutexLock l(&q->mu);
    q->stop = true;
    q->cv.SignalAll();
  }
  for (auto& t : threads_) {
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
    else if (t.joinable()) t.detach();
  }
  threads_.clear();
  for (auto& q : queues_) {
    std::deque<std::function<void()>> drop;
    absl::MutexLock l(&q->mu);
    drop.swap(q->q);
  }
}

void Workers::Run(Queue* q) {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock l(&q->mu);
      while (q->q.empty() && !q->stop) q->cv.Wait(&q->mu);
      if (q->stop) return;
      fn = std::move(q->q.front());
      q->q.pop_front();
    }
    fn();
  }
}

}  // namespace msgr::rdma
