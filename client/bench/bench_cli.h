// The bench command (tools/bench.sh -> //client/bench:bench): parses arguments, connects
// a Client, runs the write benchmark or the verify subcommand, prints the summary and
// writes JSON. See bench_args.h for the command line, bench_report.h for the JSON.
//
// Exit codes: 0 success; 1 failed ops, verify mismatches, or setup errors (monitor
// unreachable, ...); 2 bad arguments (usage printed), including an unknown --ms-type.
//
// Thread-safety: call from one thread (it runs its own workers).
#ifndef MSGR_CLIENT_BENCH_BENCH_CLI_H_
#define MSGR_CLIENT_BENCH_BENCH_CLI_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "msg/messenger.h"

namespace msgr::bench {

// Loads a keyring (AuthConfig::FromKeyringFile in the binary; injectable for tests).
using KeyringLoader = std::function<absl::StatusOr<AuthConfig>(const std::string&)>;

// `args` excludes the program name. Summary on `out`, progress and errors on `err`.
int BenchMain(const std::vector<std::string>& args, const KeyringLoader& load_keyring,
              std::ostream& out, std::ostream& err);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_BENCH_CLI_H_
