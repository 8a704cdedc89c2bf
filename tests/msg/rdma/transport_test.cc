// Transport (msg/rdma/transport.cc) over the soft verbs provider: what Create registers and
// charges, the send-buffer pool, SEND/RECV and word WRITEs between two transports, WR
// numbering with selective signalling, the send-queue limit, Kill, and the budget's
// refusals. Completions are polled by the test (no EventLoop) and reported to the sender
// with OnSendCompleted, as the completion thread does.
#include "msg/rdma/transport.h"

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/rdma/rdma_wire.h"
#include "msg/rdma/registered_budget.h"
#include "msg/rdma/verbs/device.h"
#include "tests/msg/rdma/soft_context.h"

namespace msgr::rdma {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

TransportConfig SmallConfig() {
  TransportConfig c;
  c.recv_buffers = 4;
  c.buffer_bytes = 4096;
  c.send_buffers = 8;
  c.sq_depth = 16;
  c.signal_every = 4;
  return c;
}

// Bytes Create charges for `c` (RECV pool, SEND pool, one 8-byte word source per SQ slot).
uint64_t ChargedBytes(const TransportConfig& c) {
  return uint64_t{c.buffer_bytes} * c.recv_buffers + uint64_t{c.buffer_bytes} * c.send_buffers +
         8 * uint64_t{c.sq_depth};
}

// The next completion on `cq`, or a kGeneralError one with wr_id ~0 if none comes in kWait.
verbs::Completion WaitOne(verbs::CompletionQueue* cq) {
  verbs::Completion c;
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    absl::StatusOr<int> n = cq->WaitForCompletion(&c, 1, absl::Milliseconds(100));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) break;
    if (*n == 1) return c;
  }
  ADD_FAILURE() << "no completion within " << kWait;
  c = verbs::Completion{};
  c.wr_id = ~uint64_t{0};
  return c;
}

// Completions that arrive within `window` (for "nothing more came").
int DrainFor(verbs::CompletionQueue* cq, absl::Duration window) {
  int got = 0;
  verbs::Completion c;
  const absl::Time end = absl::Now() + window;
  while (absl::Now() < end) {
    absl::StatusOr<int> n = cq->WaitForCompletion(&c, 1, absl::Milliseconds(20));
    if (!n.ok()) break;
    got += *n;
  }
  return got;
}

class TransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_a_ = testing::OpenSoftContext();
    ctx_b_ = testing::OpenSoftContext();
    ASSERT_NE(ctx_a_, nullptr);
    ASSERT_NE(ctx_b_, nullptr);
  }

  std::shared_ptr<Transport> Make(const std::shared_ptr<DeviceContext>& ctx,
                                  const TransportConfig& c, const std::string& peer) {
    auto t = Transport::Create(ctx, c, budget_.get(), peer);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : nullptr;
  }

  // Two connected transports, b's receives posted.
  void MakePair(const TransportConfig& ca, const TransportConfig& cb) {
    a_ = Make(ctx_a_, ca, "b");
    b_ = Make(ctx_b_, cb, "a");
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(b_->PostAllRecvs().ok());
    ASSERT_TRUE(a_->qp()->Connect(b_->qp()->local_endpoint()).ok());
    ASSERT_TRUE(b_->qp()->Connect(a_->qp()->local_endpoint()).ok());
  }

  // Puts a fragment header and `body` into a fresh send buffer of `t` and posts it as one
  // SEND (signalled when asked). Returns the WR number.
  uint64_t SendFragment(Transport& t, uint64_t seq, const std::string& body, bool signal) {
    const int buf = t.TakeSendBuffer();
    EXPECT_GE(buf, 0) << "no free send buffer";
    if (buf < 0) return 0;
    SendHeader h;
    h.kind = SendKind::kFragment;
    h.flags = kSendFirst | kSendLast;
    h.msg_type = 7;
    h.frag_len = static_cast<uint32_t>(body.size());
    h.total_len = h.frag_len;
    h.seq = seq;
    EncodeSendHeader(h, t.send_buffer(buf));
    std::memcpy(t.send_buffer(buf) + kSendHeaderBytes, body.data(), body.size());
    WrSpec w;
    w.opcode = verbs::WrOpcode::kSend;
    w.sge = t.SendBufferSge(buf, static_cast<uint32_t>(kSendHeaderBytes + body.size()));
    w.signal = signal;
    w.send_buffer = buf;
    auto n = t.Post({&w, 1});
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : 0;
  }

  // Waits for b's next receive and returns (buffer index, body), checking its header.
  std::pair<uint32_t, std::string> ReceiveFragment(uint64_t want_seq) {
    const verbs::Completion c = WaitOne(b_->cq());
    EXPECT_EQ(c.status, verbs::WcStatus::kSuccess) << verbs::WcStatusName(c.status);
    EXPECT_EQ(c.opcode, verbs::WcOpcode::kRecv);
    EXPECT_NE(c.wr_id & kRecvWrBit, 0u) << "receives carry kRecvWrBit";
    const uint32_t index = static_cast<uint32_t>(c.wr_id & ~kRecvWrBit);
    EXPECT_LT(index, b_->config().recv_buffers);
    if (c.status != verbs::WcStatus::kSuccess || index >= b_->config().recv_buffers) {
      return {index, ""};
    }
    SendHeader h;
    const absl::Status s = DecodeSendHeader(b_->recv_buffer(index), c.byte_len, &h);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(h.seq, want_seq);
    EXPECT_EQ(h.msg_type, 7);
    return {index, std::string(reinterpret_cast<const char*>(b_->recv_buffer(index)) +
                                   kSendHeaderBytes,
                               h.frag_len)};
  }

  std::shared_ptr<RegisteredBudget> budget_ = RegisteredBudget::Create(64 << 20);
  std::shared_ptr<DeviceContext> ctx_a_, ctx_b_;
  std::shared_ptr<Transport> a_, b_;
};

TEST_F(TransportTest, CreateRegistersThePoolsAndChargesThemUntilDestroyed) {
  const TransportConfig c = SmallConfig();
  {
    auto t = Make(ctx_a_, c, "peer");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(budget_->used(), ChargedBytes(c));
    EXPECT_GE(t->registered_bytes(), ChargedBytes(c));
    EXPECT_EQ(t->config().recv_buffers, 4u);
    EXPECT_EQ(t->config().send_buffers, 8u);
    EXPECT_EQ(t->fragment_bytes(), 4096u - kSendHeaderBytes);
    EXPECT_EQ(t->free_send_buffers(), 8);
    EXPECT_EQ(t->posted(), 0u);
    EXPECT_EQ(t->retired(), 0u);
    EXPECT_FALSE(t->dead());
    ASSERT_NE(t->qp(), nullptr);
    ASSERT_NE(t->cq(), nullptr);
    EXPECT_EQ(t->qp()->state(), verbs::QpState::kInit);
    EXPECT_GE(t->cq()->depth(), static_cast<int>(c.sq_depth + c.recv_buffers));
    auto second = Make(ctx_a_, c, "peer2");
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(budget_->used(), 2 * ChargedBytes(c));
  }
  EXPECT_EQ(budget_->used(), 0u) << "a destroyed transport gives its registration back";
}

TEST_F(TransportTest, CreateClampsDepthsToTheDeviceAndSignallingToAQuarterOfTheQueue) {
  TransportConfig c = SmallConfig();
  c.sq_depth = 64;
  c.signal_every = 1000;
  auto t = Make(ctx_a_, c, "peer");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->config().signal_every, 16u);
  c.signal_every = 0;
  t = Make(ctx_a_, c, "peer");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->config().signal_every, 1u);

  const uint32_t max_wr = ctx_a_->device->attr().max_qp_wr;
  ASSERT_GT(max_wr, 0u);
  c = SmallConfig();
  c.sq_depth = max_wr * 2;
  c.recv_buffers = max_wr + 1;
  c.buffer_bytes = 128;  // keeps the oversized RECV pool small
  t = Make(ctx_a_, c, "peer");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->config().sq_depth, max_wr);
  EXPECT_EQ(t->config().recv_buffers, max_wr);
}

TEST_F(TransportTest, PoolsTooSmallAreRefusedBeforeAnythingIsCharged) {
  struct Case {
    const char* what;
    void (*shrink)(TransportConfig*);
  };
  for (const Case& k : {
           Case{"recv_buffers", [](TransportConfig* c) { c->recv_buffers = 3; }},
           Case{"send_buffers", [](TransportConfig* c) { c->send_buffers = 1; }},
           Case{"sq_depth", [](TransportConfig* c) { c->sq_depth = 15; }},
           Case{"buffer_bytes", [](TransportConfig* c) {
                  c->buffer_bytes = static_cast<uint32_t>(kSendHeaderBytes + 63);
                }},
       }) {
    SCOPED_TRACE(k.what);
    TransportConfig c = SmallConfig();
    k.shrink(&c);
    auto t = Transport::Create(ctx_a_, c, budget_.get(), "peer");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_NE(t.status().message().find("buffer pool too small"), absl::string_view::npos)
        << t.status();
    EXPECT_EQ(budget_->used(), 0u);
    EXPECT_EQ(budget_->refusals(), 0u);
  }
}

// Each of the three registrations can be the one the budget refuses: the error names
// which, for which peer, and what was charged before it is given back.
TEST_F(TransportTest, BudgetRefusalNamesThePoolAndPeerAndLeavesNothingCharged) {
  const TransportConfig c = SmallConfig();
  const uint64_t recv = uint64_t{c.buffer_bytes} * c.recv_buffers;
  const uint64_t send = uint64_t{c.buffer_bytes} * c.send_buffers;
  struct Case {
    uint64_t budget;
    const char* pool;
  };
  int refusals = 0;
  for (const Case& k : {Case{recv - 1, "the RECV pool of a connection with osd.3"},
                        Case{recv + send - 1, "the SEND pool of a connection with osd.3"},
                        Case{recv + send + 7,
                             "the WRITE word sources of a connection with osd.3"}}) {
    SCOPED_TRACE(k.pool);
    auto budget = RegisteredBudget::Create(k.budget);
    auto t = Transport::Create(ctx_a_, c, budget.get(), "osd.3");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted) << t.status();
    EXPECT_NE(t.status().message().find(k.pool), absl::string_view::npos) << t.status();
    EXPECT_NE(t.status().message().find("rdma_max_registered_mb"), absl::string_view::npos)
        << t.status();
    EXPECT_EQ(budget->used(), 0u) << "the pools charged before the refusal are given back";
    EXPECT_EQ(budget->refusals(), 1u);
    ++refusals;
  }
  EXPECT_EQ(refusals, 3);
  // Exactly enough is enough.
  auto budget = RegisteredBudget::Create(ChargedBytes(c));
  auto t = Transport::Create(ctx_a_, c, budget.get(), "osd.3");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(budget->used(), budget->max());
}

TEST_F(TransportTest, SendBuffersAreDistinctUntilTheyRunOutAndComeBackWhenReturned) {
  const TransportConfig c = SmallConfig();
  auto t = Make(ctx_a_, c, "peer");
  ASSERT_NE(t, nullptr);
  std::vector<int> taken;
  for (uint32_t i = 0; i < c.send_buffers; ++i) {
    const int b = t->TakeSendBuffer();
    ASSERT_GE(b, 0);
    ASSERT_LT(b, static_cast<int>(c.send_buffers));
    for (int other : taken) ASSERT_NE(b, other);
    taken.push_back(b);
    // Fill the whole buffer with its own index: buffers must not overlap.
    std::memset(t->send_buffer(b), b + 1, c.buffer_bytes);
  }
  EXPECT_EQ(t->TakeSendBuffer(), -1);
  EXPECT_EQ(t->free_send_buffers(), 0);
  for (int b : taken) {
    const uint8_t* p = t->send_buffer(b);
    for (uint32_t i = 0; i < c.buffer_bytes; ++i) {
      ASSERT_EQ(p[i], b + 1) << "buffer " << b << " byte " << i << " overwritten";
    }
    const verbs::Sge sge = t->SendBufferSge(b, 100);
    EXPECT_EQ(sge.addr, reinterpret_cast<uint64_t>(p));
    EXPECT_EQ(sge.length, 100u);
  }
  t->ReturnSendBuffer(taken[3]);
  EXPECT_EQ(t->free_send_buffers(), 1);
  EXPECT_EQ(t->TakeSendBuffer(), taken[3]);
  EXPECT_EQ(t->TakeSendBuffer(), -1);
}

TEST_F(TransportTest, SendArrivesInTheReceiversPostedBufferAndRetiresTheSendBuffer) {
  MakePair(SmallConfig(), SmallConfig());
  const std::string body = "a fragment of a message, " + std::string(1000, 'x') + "!";
  const int free_before = a_->free_send_buffers();
  const uint64_t wr = SendFragment(*a_, 1, body, /*signal=*/true);
  EXPECT_EQ(wr, 1u) << "WRs are numbered from 1";
  EXPECT_EQ(a_->posted(), 1u);
  EXPECT_EQ(a_->free_send_buffers(), free_before - 1) << "busy until its WR retires";

  auto [index, got] = ReceiveFragment(1);
  EXPECT_EQ(got, body);
  EXPECT_EQ(index, 0u);

  const verbs::Completion sc = WaitOne(a_->cq());
  EXPECT_EQ(sc.status, verbs::WcStatus::kSuccess) << verbs::WcStatusName(sc.status);
  EXPECT_EQ(sc.wr_id, 1u);
  EXPECT_EQ(a_->retired(), 0u) << "only OnSendCompleted retires";
  a_->OnSendCompleted(sc.wr_id);
  EXPECT_EQ(a_->retired(), 1u);
  EXPECT_EQ(a_->free_send_buffers(), free_before);
  EXPECT_TRUE(a_->WaitRetired(1, absl::Now() + kWait));
}

// Every receive buffer carries its own SEND; a buffer is usable again once re-posted (a
// SEND that found no posted receive would fail the QP pair: kRnrRetryExceeded).
TEST_F(TransportTest, ReceiveBuffersAreUsedInTurnAndReusedAfterRepost) {
  MakePair(SmallConfig(), SmallConfig());
  const uint32_t n = b_->config().recv_buffers;
  uint64_t seq = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::vector<std::string> bodies;
    for (uint32_t i = 0; i < n; ++i) {
      bodies.push_back(absl::StrCat("round ", round, " message ", i, std::string(i * 300, 'a' + i)));
      SendFragment(*a_, ++seq, bodies.back(), /*signal=*/true);
    }
    std::vector<bool> seen(n, false);
    for (uint32_t i = 0; i < n; ++i) {
      auto [index, got] = ReceiveFragment(seq - n + 1 + i);
      EXPECT_EQ(got, bodies[i]);
      ASSERT_LT(index, n);
      EXPECT_FALSE(seen[index]) << "buffer " << index << " used twice in one round";
      seen[index] = true;
    }
    for (uint32_t i = 0; i < n; ++i) {
      const verbs::Completion sc = WaitOne(a_->cq());
      ASSERT_EQ(sc.status, verbs::WcStatus::kSuccess) << verbs::WcStatusName(sc.status);
      a_->OnSendCompleted(sc.wr_id);
    }
    EXPECT_EQ(a_->retired(), seq);
    for (uint32_t i = 0; i < n; ++i) ASSERT_TRUE(b_->RepostRecv(i).ok());
  }
  EXPECT_EQ(a_->free_send_buffers(), static_cast<int>(a_->config().send_buffers));
}

TEST_F(TransportTest, WordWritesLandAtTheRemoteAddress) {
  MakePair(SmallConfig(), SmallConfig());
  auto target = ctx_b_->pd->AllocRegion(4096, verbs::kLocalWrite | verbs::kRemoteWrite);
  ASSERT_TRUE(target.ok()) << target.status();
  std::vector<WrSpec> chain(3);
  const uint64_t values[3] = {0x0123456789abcdefull, 42, ~uint64_t{0}};
  for (int i = 0; i < 3; ++i) {
    chain[i].opcode = verbs::WrOpcode::kRdmaWrite;
    chain[i].word = true;
    chain[i].value = values[i];
    chain[i].remote_addr = reinterpret_cast<uint64_t>((*target)->data()) + 64 * (i + 1);
    chain[i].rkey = (*target)->rkey();
  }
  chain[2].signal = true;
  auto last = a_->Post(chain);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(*last, 3u) << "Post returns the number of the chain's last WR";
  const verbs::Completion c = WaitOne(a_->cq());
  EXPECT_EQ(c.status, verbs::WcStatus::kSuccess) << verbs::WcStatusName(c.status);
  EXPECT_EQ(c.wr_id, 3u);
  for (int i = 0; i < 3; ++i) {
    uint64_t got = 0;
    std::memcpy(&got, (*target)->data() + 64 * (i + 1), 8);
    EXPECT_EQ(got, values[i]) << "word " << i;
  }
  EXPECT_EQ((*target)->data()[0], 0) << "nothing else written";
}

// signal_every = 4: WRs 4 and 8 complete, each retiring every WR before it.
TEST_F(TransportTest, SelectiveSignallingRetiresEveryEarlierWrWithTheSignalledOne) {
  MakePair(SmallConfig(), SmallConfig());
  auto target = ctx_b_->pd->AllocRegion(4096, verbs::kLocalWrite | verbs::kRemoteWrite);
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_EQ(a_->config().signal_every, 4u);
  for (int i = 0; i < 8; ++i) {
    WrSpec w;
    w.opcode = verbs::WrOpcode::kRdmaWrite;
    w.send_buffer = a_->TakeSendBuffer();
    ASSERT_GE(w.send_buffer, 0);
    std::memset(a_->send_buffer(w.send_buffer), 'A' + i, 16);
    w.sge = a_->SendBufferSge(w.send_buffer, 16);
    w.remote_addr = reinterpret_cast<uint64_t>((*target)->data()) + 16 * i;
    w.rkey = (*target)->rkey();
    auto n = a_->Post({&w, 1});
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, static_cast<uint64_t>(i + 1));
  }
  EXPECT_EQ(a_->free_send_buffers(), 0);
  const verbs::Completion c4 = WaitOne(a_->cq());
  const verbs::Completion c8 = WaitOne(a_->cq());
  EXPECT_EQ(c4.wr_id, 4u);
  EXPECT_EQ(c8.wr_id, 8u);
  EXPECT_EQ(DrainFor(a_->cq(), absl::Milliseconds(100)), 0) << "unsignalled WRs complete silently";
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ((*target)->data()[16 * i], 'A' + i);
    EXPECT_EQ((*target)->data()[16 * i + 15], 'A' + i);
  }
  a_->OnSendCompleted(c4.wr_id);
  EXPECT_EQ(a_->retired(), 4u);
  EXPECT_EQ(a_->free_send_buffers(), 4) << "the buffers of WRs 1-4 are back";
  a_->OnSendCompleted(2);  // older than what is retired: ignored
  EXPECT_EQ(a_->retired(), 4u);
  EXPECT_EQ(a_->free_send_buffers(), 4);
  a_->OnSendCompleted(c8.wr_id);
  EXPECT_EQ(a_->retired(), 8u);
  EXPECT_EQ(a_->free_send_buffers(), 8);
}

// At most sq_depth - 1 WRs are outstanding: a chain that does not fit is refused whole.
TEST_F(TransportTest, FullSendQueueRefusesTheWholeChainUntilWrsRetire) {
  MakePair(SmallConfig(), SmallConfig());
  auto target = ctx_b_->pd->AllocRegion(4096, verbs::kLocalWrite | verbs::kRemoteWrite);
  ASSERT_TRUE(target.ok()) << target.status();
  WrSpec w;
  w.opcode = verbs::WrOpcode::kRdmaWrite;
  w.word = true;
  w.value = 1;
  w.remote_addr = reinterpret_cast<uint64_t>((*target)->data());
  w.rkey = (*target)->rkey();
  const uint32_t room = a_->config().sq_depth - 1;
  for (uint32_t i = 0; i + 1 < room; ++i) ASSERT_TRUE(a_->Post({&w, 1}).ok()) << i;
  const WrSpec two[2] = {w, w};
  auto refused = a_->Post(two);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("send queue full"), absl::string_view::npos);
  EXPECT_EQ(a_->posted(), room - 1) << "nothing of a refused chain is posted";
  ASSERT_TRUE(a_->Post({&w, 1}).ok());
  EXPECT_EQ(a_->posted(), room);
  EXPECT_EQ(a_->Post({&w, 1}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(a_->WaitForRoom(1, absl::Now() + absl::Milliseconds(20)))
      << "no room until something retires";
  EXPECT_FALSE(a_->WaitRetired(room, absl::Now() + absl::Milliseconds(20)));

  // A waiter is woken by the retirement.
  bool room_seen = false;
  std::thread waiter([&] { room_seen = a_->WaitForRoom(2, absl::Now() + kWait); });
  a_->OnSendCompleted(room);
  waiter.join();
  EXPECT_TRUE(room_seen);
  EXPECT_TRUE(a_->Post(two).ok());
  EXPECT_FALSE(a_->dead());
}

TEST_F(TransportTest, PostBeforeTheQpIsConnectedFailsWithoutKillingTheTransport) {
  auto t = Make(ctx_a_, SmallConfig(), "peer");
  ASSERT_NE(t, nullptr);
  WrSpec w;
  w.opcode = verbs::WrOpcode::kRdmaWrite;
  w.word = true;
  auto n = t->Post({&w, 1});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition) << n.status();
  EXPECT_EQ(t->posted(), 0u);
  EXPECT_FALSE(t->dead());
}

TEST_F(TransportTest, KillFailsLaterPostsAndWakesWaiters) {
  MakePair(SmallConfig(), SmallConfig());
  bool retired = true;
  std::thread waiter([&] { retired = a_->WaitRetired(100, absl::Now() + kWait); });
  a_->Kill();
  waiter.join();
  EXPECT_FALSE(retired) << "a waiter learns the transport died";
  EXPECT_TRUE(a_->dead());
  EXPECT_EQ(a_->qp()->state(), verbs::QpState::kError);
  WrSpec w;
  w.opcode = verbs::WrOpcode::kRdmaWrite;
  w.word = true;
  auto n = a_->Post({&w, 1});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnavailable) << n.status();
  EXPECT_NE(n.status().message().find("down"), absl::string_view::npos) << n.status();
  EXPECT_EQ(a_->posted(), 0u);
  EXPECT_FALSE(a_->WaitForRoom(1, absl::Now() + kWait)) << "returns at once when dead";
  a_->Kill();  // idempotent
  EXPECT_TRUE(a_->dead());
}

// Receives posted before the QP fails complete flushed, so the receiver learns of it.
TEST_F(TransportTest, KillFlushesPostedReceives) {
  MakePair(SmallConfig(), SmallConfig());
  b_->Kill();
  for (uint32_t i = 0; i < b_->config().recv_buffers; ++i) {
    const verbs::Completion c = WaitOne(b_->cq());
    EXPECT_EQ(c.status, verbs::WcStatus::kWrFlushError) << verbs::WcStatusName(c.status);
    EXPECT_NE(c.wr_id & kRecvWrBit, 0u);
  }
}

}  // namespace
}  // namespace msgr::rdma
