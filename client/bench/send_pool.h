// SendPool: a few threads that run the bench's asynchronous write calls for large
// objects. The objecter sends on the calling thread (the record copy, any wait for ring
// credit), so with one driver thread 4 MiB writes were serialized behind each other
// (rdma 4M -t 16 spent 61% of the run inside AsyncWrite). Small objects keep calling
// inline: for them a hand-off costs more than the send.
//
// Thread-safety: Post from one thread (the driver); tasks run in order per worker,
// round-robin across workers. The destructor runs what was posted, then joins.
#ifndef MSGR_CLIENT_BENCH_SEND_POOL_H_
#define MSGR_CLIENT_BENCH_SEND_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace msgr::bench {

class SendPool {
 public:
  explicit SendPool(int threads);
  ~SendPool();
  SendPool(const SendPool&) = delete;
  SendPool& operator=(const SendPool&) = delete;

  void Post(std::function<void()> task);

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> q;
    bool stop = false;
    std::thread thread;
  };
  static void Run(Worker* w);
  std::vector<std::unique_ptr<Worker>> workers_;
  size_t next_ = 0;
};

// Default of --submit-threads for an object size: 2 from 256 KiB up, else 0 (inline).
int DefaultSubmitThreads(uint64_t object_size);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_SEND_POOL_H_
