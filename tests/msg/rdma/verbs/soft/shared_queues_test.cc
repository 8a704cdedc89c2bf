#include "msg/rdma/verbs/soft/shared_queues.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "gtest/gtest.h"

namespace msgr::verbs::soft {
namespace {

Completion Recv(uint64_t wr_id) {
  Completion c;
  c.wr_id = wr_id;
  c.status = WcStatus::kSuccess;
  c.opcode = WcOpcode::kRecv;
  return c;
}

bool Readable(int fd, int timeout_ms = 0) {
  struct pollfd p = {fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

// What a peer process holds: its own mapping of the owner's pages (fds dup'ed, as
// SCM_RIGHTS would hand them over).
SharedCq AttachPeerCq(const SharedCq& cq) {
  auto peer = SharedCq::Attach(::dup(cq.mem_fd()), ::dup(cq.event_fd()));
  EXPECT_TRUE(peer.ok()) << peer.status();
  return std::move(*peer);
}

TEST(SharedCqTest, CompletionsComeOutInOrderAndAnArmedChannelIsWokenOnce) {
  auto cq = SharedCq::Create(8);
  ASSERT_TRUE(cq.ok()) << cq.status();
  SharedCq peer = AttachPeerCq(*cq);
  Completion out[8];
  EXPECT_EQ(cq->Poll(out, 8), 0);
  cq->Push(Recv(1));  // not armed: no event
  EXPECT_FALSE(Readable(cq->event_fd()));
  cq->Arm();  // armed with one queued: woken at once
  EXPECT_TRUE(Readable(cq->event_fd()));
  cq->ConsumeEvents();
  ASSERT_EQ(cq->Poll(out, 8), 1);
  EXPECT_EQ(out[0].wr_id, 1u);
  cq->Arm();
  EXPECT_FALSE(Readable(cq->event_fd()));
  peer.Push(Recv(2));  // the peer's push wakes the owner's channel
  EXPECT_TRUE(Readable(cq->event_fd()));
  cq->ConsumeEvents();
  peer.Push(Recv(3));  // the arm was used up: no second event
  EXPECT_FALSE(Readable(cq->event_fd()));
  ASSERT_EQ(cq->Poll(out, 8), 2);
  EXPECT_EQ(out[0].wr_id, 2u);
  EXPECT_EQ(out[1].wr_id, 3u);
}

TEST(SharedCqTest, AFullQueueIsAnOverrunThatFailsTheCq) {
  auto cq = SharedCq::Create(2);
  ASSERT_TRUE(cq.ok());
  for (uint64_t i = 0; i < 3; ++i) cq->Push(Recv(i));
  Completion out[4];
  EXPECT_EQ(cq->Poll(out, 4), -1);
  EXPECT_EQ(cq->Poll(out, 4), -1);
}

TEST(SharedRqTest, WriteWithImmTakesTheOldestReceiveAndCloseFlushesTheRest) {
  auto cq = SharedCq::Create(8);
  auto rq = SharedRq::Create(4);
  ASSERT_TRUE(cq.ok() && rq.ok());
  auto peer_rq = SharedRq::Attach(::dup(rq->mem_fd()));
  ASSERT_TRUE(peer_rq.ok()) << peer_rq.status();
  SharedCq peer_cq = AttachPeerCq(*cq);
  EXPECT_EQ(peer_rq->DeliverWriteImm(peer_cq, 9, 100, 7), WcStatus::kRnrRetryExceeded);
  for (uint64_t id : {11, 12, 13, 14}) EXPECT_GE(rq->Post(id), 0);
  EXPECT_EQ(rq->Post(15), -1) << "a full receive queue takes no more";
  ASSERT_EQ(peer_rq->DeliverWriteImm(peer_cq, 9, 100, 7), WcStatus::kSuccess);
  uint64_t wr_id = 0;
  size_t slot = 0;
  ASSERT_TRUE(rq->Take(&wr_id, &slot));  // the owner's SEND takes the next one
  EXPECT_EQ(wr_id, 12u);
  Completion out[8];
  ASSERT_EQ(cq->Poll(out, 8), 1);
  EXPECT_EQ(out[0].wr_id, 11u);
  EXPECT_EQ(out[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_TRUE(out[0].has_imm);
  EXPECT_EQ(out[0].imm_data, 7u);
  EXPECT_EQ(out[0].byte_len, 100u);
  EXPECT_EQ(out[0].qp_num, 9u);
  EXPECT_EQ(rq->Close(), (std::vector<uint64_t>{13, 14}));
  EXPECT_EQ(peer_rq->DeliverWriteImm(peer_cq, 9, 100, 7), WcStatus::kRetryExceeded)
      << "a closed queue (QP in error or destroyed) refuses";
  EXPECT_EQ(rq->Post(16), -1);
  EXPECT_EQ(cq->Poll(out, 8), 0);
}

// Another process completes into our CQ while we consume: every completion arrives once,
// in order; a producer killed holding the lock does not wedge the queue.
TEST(SharedQueuesTest, AnotherProcessDeliversInOrderAndItsDeathHoldingTheLockIsSurvived) {
  constexpr uint64_t kN = 20000;
  auto cq = SharedCq::Create(kN + 1);  // room for all: the test is order, not flow control
  auto rq = SharedRq::Create(kN);
  ASSERT_TRUE(cq.ok() && rq.ok());
  for (uint64_t i = 0; i < kN; ++i) ASSERT_GE(rq->Post(1000 + i), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto prq = SharedRq::Attach(::dup(rq->mem_fd()));
    auto pcq = SharedCq::Attach(::dup(cq->mem_fd()), ::dup(cq->event_fd()));
    if (!prq.ok() || !pcq.ok()) ::_exit(2);
    for (uint64_t i = 0; i < kN; ++i) {
      if (prq->DeliverWriteImm(*pcq, 5, 0, static_cast<uint32_t>(i)) != WcStatus::kSuccess) {
        ::_exit(3);
      }
    }
    pcq->AbandonLockForTest();
    ::_exit(0);  // dies holding the CQ's lock
  }
  Completion out[64];
  uint64_t next = 0;
  while (next < kN) {
    const int n = cq->Poll(out, 64);
    ASSERT_GE(n, 0) << "CQ overrun at " << next;
    for (int k = 0; k < n; ++k, ++next) {
      ASSERT_EQ(out[k].wr_id, 1000 + next);
      ASSERT_EQ(out[k].imm_data, static_cast<uint32_t>(next));
    }
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
  cq->Push(Recv(77));  // the lock its dead holder left is taken over
  ASSERT_EQ(cq->Poll(out, 64), 1);
  EXPECT_EQ(out[0].wr_id, 77u);
}

}  // namespace
}  // namespace msgr::verbs::soft
