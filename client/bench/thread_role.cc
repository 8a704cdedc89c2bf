#include "client/bench/thread_role.h"

#include <string>

#include "absl/strings/numbers.h"

namespace msgr::bench {

ThreadRole RoleOfThread(std::string_view comm) {
  if (comm == "ms-tcp-io" || comm == "ms-rdma-cq" || comm == "ms-rdma-disp" || comm == "soft-hca") {
    return ThreadRole::kTransport;
  }
  constexpr std::string_view kPoller = "osd-poller-";
  int n;
  if (comm.substr(0, kPoller.size()) == kPoller &&
      absl::SimpleAtoi(std::string(comm.substr(kPoller.size())), &n)) {
    return ThreadRole::kPoller;
  }
  if (comm == "store-io" || comm == "store-flush" || comm == "store-compact") {
    return ThreadRole::kStore;
  }
  return ThreadRole::kOther;
}

const char* ThreadRoleName(ThreadRole role) {
  switch (role) {
    case ThreadRole::kTransport:
      return "transport";
    case ThreadRole::kPoller:
      return "poller";
    case ThreadRole::kStore:
      return "store";
    case ThreadRole::kOther:
      return "other";
  }
  return "other";
}

void AddByRole(const std::vector<ThreadCpu>& threads, RoleCpu* sum) {
  for (const ThreadCpu& t : threads) (*sum)[static_cast<int>(RoleOfThread(t.comm))] += t.cpu_s;
}

}  // namespace msgr::bench
