// A DeviceContext (device and protection domain) on the soft verbs provider, for tests that
// build transports themselves.
#ifndef MSGR_TESTS_MSG_RDMA_SOFT_CONTEXT_H_
#define MSGR_TESTS_MSG_RDMA_SOFT_CONTEXT_H_

#include <memory>
#include <utility>

#include "gtest/gtest.h"
#include "msg/rdma/transport.h"
#include "msg/rdma/verbs/device.h"

namespace msgr::rdma::testing {

// Null (after a test failure saying why) if the device or its PD cannot be opened.
inline std::shared_ptr<DeviceContext> OpenSoftContext() {
  auto ctx = std::make_shared<DeviceContext>();
  auto dev = verbs::OpenDevice("soft");
  EXPECT_TRUE(dev.ok()) << dev.status();
  if (!dev.ok()) return nullptr;
  ctx->device = std::move(*dev);
  auto pd = ctx->device->CreatePd();
  EXPECT_TRUE(pd.ok()) << pd.status();
  if (!pd.ok()) return nullptr;
  ctx->pd = std::move(*pd);
  return ctx;
}

}  // namespace msgr::rdma::testing

#endif  // MSGR_TESTS_MSG_RDMA_SOFT_CONTEXT_H_
