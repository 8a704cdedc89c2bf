#include "msg/session/delivery.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace msgr::session {
namespace {

struct Frame {
  uint64_t seq;
  std::string body;
};

TEST(DeliveryTest, ReceiverTakesTheNextSeqDropsResendsAndRefusesGaps) {
  EXPECT_EQ(CheckIncoming(1, 0), SeqCheck::kNew);
  EXPECT_EQ(CheckIncoming(5, 4), SeqCheck::kNew);
  EXPECT_EQ(CheckIncoming(4, 4), SeqCheck::kDuplicate);
  EXPECT_EQ(CheckIncoming(1, 4), SeqCheck::kDuplicate);
  EXPECT_EQ(CheckIncoming(7, 4), SeqCheck::kGap);
  EXPECT_EQ(std::string(GapError(7, 4).message()), "data frame seq 7 out of order (expected 5)");
}

TEST(DeliveryTest, AcksReleaseOldestFirstAndAResumeResendsTheRestInOrder) {
  SendWindow<Frame> w;
  for (uint64_t s = 1; s <= 5; ++s) w.Sent({s, "m" + std::to_string(s)});
  std::vector<uint64_t> released;
  EXPECT_EQ(w.Ack(2, [&](const Frame& f) { released.push_back(f.seq); }), 2u);
  EXPECT_EQ(released, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(w.Ack(2, [&](const Frame&) { ADD_FAILURE() << "acked twice"; }), 0u);
  // The peer reconnects having received up to 3; 4 and 5 go again, before what was queued.
  EXPECT_TRUE(CheckPeerInSeq(3, 5).ok());
  w.Ack(3, [&](const Frame& f) { released.push_back(f.seq); });
  std::deque<Frame> unsent = {{0, "queued"}};
  EXPECT_EQ(w.RequeueInto(&unsent), 2u);
  EXPECT_TRUE(w.empty());
  ASSERT_EQ(unsent.size(), 3u);
  EXPECT_EQ(unsent[0].seq, 4u);
  EXPECT_EQ(unsent[1].seq, 5u);
  EXPECT_EQ(unsent[2].body, "queued");
  const absl::Status bad = CheckPeerInSeq(9, 5);
  EXPECT_EQ(std::string(bad.message()), "peer says it received seq 9 but we only sent up to 5");
}

TEST(DeliveryTest, SendWindowOfPointers) {
  SendWindow<std::shared_ptr<Frame>> w;
  w.Sent(std::make_shared<Frame>(Frame{1, "a"}));
  w.Sent(std::make_shared<Frame>(Frame{2, "b"}));
  size_t n = 0;
  w.ForEach([&](const std::shared_ptr<Frame>&) { ++n; });
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(w.Ack(1, [](const std::shared_ptr<Frame>&) {}), 1u);
  EXPECT_EQ(w.size(), 1u);
}

// The peer restarted: whatever the old session sent -- written and unacknowledged, or
// requeued by a resume and not written again -- is dropped (the owner resends it); only the
// never-sent stay queued, in order.
TEST(DeliveryTest, ANewSessionKeepsOnlyTheMessagesNeverSent) {
  SendWindow<Frame> w;
  w.Sent({1, "a"});
  w.Sent({2, "b"});
  w.Sent({3, "c"});
  std::deque<Frame> unsent;
  w.Ack(1, [](const Frame&) {});
  EXPECT_EQ(w.RequeueInto(&unsent), 2u);  // a resume: b and c wait to be written again
  unsent.push_back({4, "d"});             // queued, never written
  w.Sent({9, "x"});                       // written on the resumed link, unacknowledged
  unsent.push_back({5, "e"});
  std::vector<std::string> released;
  auto never_sent = [](const Frame& f) { return f.body == "d" || f.body == "e"; };
  const size_t dropped = w.DropForNewSession(
      &unsent, never_sent, [&](const Frame& f) { released.push_back(f.body); });
  EXPECT_EQ(dropped, 3u);
  EXPECT_EQ(released, (std::vector<std::string>{"x", "b", "c"}));
  ASSERT_EQ(unsent.size(), 2u);
  EXPECT_EQ(unsent[0].body, "d");
  EXPECT_EQ(unsent[1].body, "e");
  EXPECT_TRUE(w.empty());
}

TEST(DeliveryTest, FlowWindowHoldsBothLimitsButAlwaysTakesOneMessage) {
  MessengerOptions o;
  o.conn_max_msgs_in_flight = 3;
  o.conn_max_bytes_in_flight = 1000;
  o.messenger_max_bytes_in_flight = 1500;
  std::atomic<uint64_t> total{0};
  FlowWindow w;
  EXPECT_TRUE(w.Admits(5000, 0, o)) << "an empty session takes one message of any size";
  w.Add(600, &total);
  EXPECT_FALSE(w.Admits(500, total, o)) << "600 + 500 is over the session's 1000";
  EXPECT_TRUE(w.Admits(400, total, o));
  EXPECT_FALSE(w.Admits(400, 1200, o)) << "the messenger-wide limit";
  w.Add(100, &total);
  w.Add(100, &total);
  EXPECT_FALSE(w.Admits(1, total, o)) << "three messages in flight";
  EXPECT_NE(w.Refusal("osd.1", o).message().find("3 messages / 800 bytes in flight"),
            std::string::npos)
      << w.Refusal("osd.1", o);
  w.Release(100, &total);
  EXPECT_TRUE(w.Admits(1, total, o));
  EXPECT_EQ(total.load(), 700u);
  w.Clear(&total);
  EXPECT_EQ(total.load(), 0u);
  EXPECT_EQ(w.msgs(), 0u);
  EXPECT_EQ(w.bytes(), 0u);
}

TEST(DeliveryTest, ReservedTypesAndOversizedMessagesCannotBeSent) {
  MessengerOptions o;
  o.max_message_bytes = 10;
  EXPECT_TRUE(CheckOutgoingMessage(Message{1, "small"}, o).ok());
  const absl::Status big = CheckOutgoingMessage(Message{1, std::string(11, 'x')}, o);
  EXPECT_EQ(std::string(big.message()), "message of 11 bytes is over max_message_bytes (10)");
  EXPECT_TRUE(absl::IsInvalidArgument(
      CheckOutgoingMessage(Message{static_cast<uint16_t>(kReservedMessageTypes), ""}, o)));
}

}  // namespace
}  // namespace msgr::session
