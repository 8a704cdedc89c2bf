// Starts tests/msg/client_child (see there) with fork+exec: the child runs a fresh image,
// so no lock held by this test process's threads at the fork can hang it.
#ifndef MSGR_TESTS_MSG_CLIENT_CHILD_SPAWN_H_
#define MSGR_TESTS_MSG_CLIENT_CHILD_SPAWN_H_

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <climits>
#include <string>
#include <vector>

namespace msgr::testing {

// The client_child binary next to this test's binary or one directory up (bazel-bin and
// the test's runfiles both keep the package layout); "" if it is not there.
inline std::string ClientChildPath() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  std::string dir(exe, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  for (const std::string& p : {dir + "/client_child", dir + "/../client_child"}) {
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Runs `client_child args...`; returns its pid (-1 if it could not be started).
inline pid_t SpawnClientChild(const std::vector<std::string>& args) {
  const std::string path = ClientChildPath();
  if (path.empty()) return -1;
  std::vector<std::string> all{path};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;  // built before the fork: the child only makes system calls
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // Dies with the test process (a failed test must not leave a writer running).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace msgr::testing

#endif  // MSGR_TESTS_MSG_CLIENT_CHILD_SPAWN_H_
