#include "msg/base/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace msgr {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 (iSCSI) check value and test patterns.
  const std::string digits = "123456789";
  EXPECT_EQ(Crc32c(0, digits.data(), digits.size()), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0x00);
  EXPECT_EQ(Crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);
  std::vector<unsigned char> ones(32, 0xFF);
  EXPECT_EQ(Crc32c(0, ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(0, nullptr, 0), 0u);
}

TEST(Crc32cTest, ChainingEqualsOneShot) {
  std::string data(10000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + 7);
  const uint32_t whole = Crc32c(0, data.data(), data.size());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{4095}, size_t{9999}}) {
    uint32_t c = Crc32c(0, data.data(), cut);
    c = Crc32c(c, data.data() + cut, data.size() - cut);
    EXPECT_EQ(c, whole) << "cut at " << cut;
  }
}

TEST(Crc32cTest, DetectsSingleBitFlip) {
  std::string data(4096, 'x');
  const uint32_t before = Crc32c(0, data.data(), data.size());
  data[1234] ^= 0x10;
  EXPECT_NE(Crc32c(0, data.data(), data.size()), before);
}

}  // namespace
}  // namespace msgr
