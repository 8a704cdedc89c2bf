// Bench command-line parsing: sizes, flags, and bad arguments giving a usage error (exit
// 2) rather than a crash.
#include "client/bench/bench_args.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "client/bench/bench_cli.h"
#include "gtest/gtest.h"
#include "osd_sim/mon/cluster_conf.h"

namespace msgr::bench {
namespace {

TEST(ParseSizeTest, AcceptsBinarySuffixes) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("4K"), 4096u);
  EXPECT_EQ(*ParseSize("4k"), 4096u);
  EXPECT_EQ(*ParseSize("64KiB"), 65536u);
  EXPECT_EQ(*ParseSize("4M"), 4u << 20);
  EXPECT_EQ(*ParseSize("4MB"), 4u << 20);
  EXPECT_EQ(*ParseSize("1G"), 1u << 30);
  for (const char* bad : {"", "0", "K", "-4K", "4X", "4.5K", "2G", "99999999999999999999",
                          "4KK", " ", "0x10"}) {
    EXPECT_FALSE(ParseSize(bad).ok()) << "'" << bad << "'";
  }
}

TEST(BenchArgsTest, ParsesTheDocumentedCommandLine) {
  auto a = ParseBenchArgs({"--mon", "127.0.0.1:6789", "--ms-type", "rdma", "-b", "64K", "-t",
                           "8", "--seconds", "5", "--count", "100", "--json", "r.json",
                           "--acked-log", "acked.txt", "--verify", "--auth", "none",
                           "--prefix", "p", "--osd-pids", "10,11", "--cluster-dir=/tmp/c"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->mode, BenchArgs::Mode::kWrite);
  EXPECT_EQ(a->mon, "127.0.0.1:6789");
  EXPECT_EQ(a->ms_type, "rdma");
  EXPECT_EQ(a->object_size, 65536u);
  EXPECT_EQ(a->concurrency, 8);
  EXPECT_EQ(a->seconds, 5);
  EXPECT_EQ(a->count, 100u);
  EXPECT_EQ(a->json_path, "r.json");
  EXPECT_EQ(a->acked_log, "acked.txt");
  EXPECT_TRUE(a->verify);
  EXPECT_EQ(a->auth, "none");
  EXPECT_EQ(a->prefix, "p");
  EXPECT_EQ(a->osd_pids, (std::vector<int>{10, 11}));
  EXPECT_EQ(a->cluster_dir, "/tmp/c");

  auto v = ParseBenchArgs({"verify", "--mon", "h:1", "--oids", "f", "--json", "v.json"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->mode, BenchArgs::Mode::kVerify);
  EXPECT_EQ(v->oids_file, "f");
  EXPECT_EQ(v->ms_type, "tcp");
  EXPECT_FALSE(v->object_size_given);
  EXPECT_EQ(v->pool, "");
  EXPECT_FALSE(a->pool.size());

  // verify -b SIZE (each object's size is checked) --pool NAME.
  auto vb = ParseBenchArgs({"verify", "--mon", "h:1", "--oids", "f", "-b", "16K", "--pool=two"});
  ASSERT_TRUE(vb.ok()) << vb.status();
  EXPECT_TRUE(vb->object_size_given);
  EXPECT_EQ(vb->object_size, 16384u);
  EXPECT_EQ(vb->pool, "two");
  auto wp = ParseBenchArgs({"--mon", "h:1", "--pool", "images"});
  ASSERT_TRUE(wp.ok()) << wp.status();
  EXPECT_EQ(wp->pool, "images");
  EXPECT_FALSE(ParseBenchArgs({"--mon", "h:1", "--pool", ""}).ok()) << "an empty pool name";
}

TEST(BenchArgsTest, EachClientKeepsItsShareOfTheOpsInFlight) {
  auto a = ParseBenchArgs({"--mon", "127.0.0.1:6789", "-t", "16"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->OpsPerClient(), 16);
  a = ParseBenchArgs({"--mon", "127.0.0.1:6789", "-t", "20", "--clients", "20"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->OpsPerClient(), 1);
  a = ParseBenchArgs({"--mon", "127.0.0.1:6789", "-t", "80", "--clients", "20"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->OpsPerClient(), 4);
  // 10 ops over 4 clients in turn: 3, 3, 2, 2.
  a = ParseBenchArgs({"--mon", "127.0.0.1:6789", "-t", "10", "--clients", "4"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->OpsPerClient(), 3);
}

TEST(BenchArgsTest, BadArgumentsAreErrorsNamingTheFlag) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--ms-type", "tcp"},
      {"--mon"},
      {"--mon", "nohost"},
      {"--mon", "h:0"},
      {"--mon", "h:70000"},
      {"--mon", "h:1", "-b", "huge"},
      {"--mon", "h:1", "-t", "0"},
      {"--mon", "h:1", "-t", "x"},
      {"--mon", "h:1", "--seconds", "-1"},
      {"--mon", "h:1", "--seconds", "nan"},
      {"--mon", "h:1", "--seconds", "0"},
      {"--mon", "h:1", "--count", "0"},
      {"--mon", "h:1", "--ms-type", "TCP!"},
      {"--mon", "h:1", "--bogus"},
      {"--mon", "h:1", "--verify=yes"},
      {"--mon", "h:1", "--osd-pids", "1,x"},
      {"--mon", "h:1", "--json", ""},
      {"--mon", "h:1", "--oids", "f"},
      {"verify", "--mon", "h:1"},
      {"verify", "--mon", "h:1", "--oids", "f", "--verify"},
  };
  for (const auto& args : bad) {
    auto a = ParseBenchArgs(args);
    std::string joined;
    for (const auto& s : args) joined += s + " ";
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << joined;
  }
  auto a = ParseBenchArgs({"--mon", "h:1", "-t", "0"});
  EXPECT_NE(a.status().message().find("-t"), std::string::npos) << a.status();
  auto unknown = ParseBenchArgs({"--mon", "h:1", "--no-such-flag"});
  EXPECT_EQ(unknown.status().message(), "unknown argument '--no-such-flag'");
}

// The flags behind the parser are globals: a parse starts from their defaults, never from
// what the previous one set.
TEST(BenchArgsTest, EachParseStartsFromTheDefaults) {
  auto first = ParseBenchArgs({"--mon", "h:1", "--verify", "-b", "4K", "-t", "2", "--json=j",
                               "--auth", "/old/k"});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ParseBenchArgs({"--mon", "h:2"});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->verify);
  EXPECT_FALSE(second->object_size_given);
  EXPECT_EQ(second->object_size, 4u << 20);
  EXPECT_EQ(second->concurrency, 16);
  EXPECT_EQ(second->json_path, "");
  EXPECT_EQ(second->auth, "");
  EXPECT_EQ(second->keyring, "");
}

// Spellings the shared flag parser adds: --noverify, --verify=false, --flag_with_underscores,
// and the later of --auth FILE and --keyring FILE naming the keyring.
TEST(BenchArgsTest, NewSpellingsAndTheLaterKeyringWins) {
  auto a = ParseBenchArgs({"--mon=h:1", "--verify", "--noverify", "--acked_log", "l"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->verify);
  EXPECT_EQ(a->acked_log, "l");
  auto off = ParseBenchArgs({"--mon=h:1", "--verify=false"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->verify);
  auto later_keyring = ParseBenchArgs({"--mon=h:1", "--auth", "/old", "--keyring", "/new"});
  ASSERT_TRUE(later_keyring.ok()) << later_keyring.status();
  EXPECT_EQ(later_keyring->keyring, "/new");
  auto later_auth = ParseBenchArgs({"--mon=h:1", "--keyring", "/new", "--auth", "/old"});
  ASSERT_TRUE(later_auth.ok()) << later_auth.status();
  EXPECT_EQ(later_auth->keyring, "/old");
  EXPECT_EQ(later_auth->auth, "secret");
}

TEST(BenchArgsTest, AuthIsSecretOrNoneAndTheKeyringHasItsOwnFlag) {
  auto secret = ParseBenchArgs({"--mon", "h:1", "--auth=secret", "--cluster-dir", "/c"});
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(secret->auth, "secret");
  EXPECT_EQ(secret->keyring, "");
  auto none = ParseBenchArgs({"--mon", "h:1", "--auth", "none", "--cluster-dir=/c"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->auth, "none");
  auto keyring = ParseBenchArgs({"--mon", "h:1", "--keyring=/k"});
  ASSERT_TRUE(keyring.ok()) << keyring.status();
  EXPECT_EQ(keyring->auth, "secret");
  EXPECT_EQ(keyring->keyring, "/k");
  // The old spelling: --auth KEYRING.
  auto old = ParseBenchArgs({"--mon", "h:1", "--auth", "/old/keyring"});
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->auth, "secret");
  EXPECT_EQ(old->keyring, "/old/keyring");
  auto unset = ParseBenchArgs({"--mon", "h:1"});
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->auth, "");

  // secret with nowhere to find the secret, or none beside a keyring: errors naming --auth.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--mon", "h:1", "--auth", "secret"},
        {"--mon", "h:1", "--auth", "none", "--keyring", "/k"},
        {"--mon", "h:1", "--keyring", "/k", "--auth=none"},
        {"--mon", "h:1", "--auth="}}) {
    auto a = ParseBenchArgs(args);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << args.back();
    EXPECT_NE(a.status().message().find("--auth"), std::string::npos) << a.status();
  }
}

absl::StatusOr<AuthConfig> NoKeyrings(const std::string& path) {
  return absl::NotFoundError("cannot read " + path);
}

TEST(BenchMainTest, BadArgumentsPrintUsageAndExit2) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"-t", "-1"}, {"--mon", "h:1", "-b", "0"}, {"--what"},
        {"verify"}, {"--mon", "127.0.0.1:1", "--auth", "/no/such/keyring"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(BenchMain(args, NoKeyrings, out, err), 2) << err.str();
    EXPECT_TRUE(out.str().empty());
    EXPECT_NE(err.str().find("bench: "), std::string::npos) << err.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(BenchMain({"--help"}, NoKeyrings, out, err), 0);
  EXPECT_NE(out.str().find("usage:"), std::string::npos);
}

// Which keyring BenchMain loads: the loader fails, so it exits 2 before connecting.
TEST(BenchMainTest, LoadsTheKeyringThatAuthAndKeyringName) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--auth", "secret", "--cluster-dir", "/c"}, "/c/keyring"},
      {{"--auth=secret", "--keyring=/k", "--cluster-dir", "/c"}, "/k"},
      {{"--keyring", "/k"}, "/k"},
      {{"--auth", "/old/keyring"}, "/old/keyring"},
  };
  for (const auto& [flags, want] : cases) {
    std::vector<std::string> args = {"--mon", "127.0.0.1:1"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<std::string> loaded;
    auto loader = [&](const std::string& path) -> absl::StatusOr<AuthConfig> {
      loaded.push_back(path);
      return absl::NotFoundError("cannot read " + path);
    };
    std::ostringstream out, err;
    EXPECT_EQ(BenchMain(args, loader, out, err), 2) << err.str();
    EXPECT_EQ(loaded, std::vector<std::string>{want}) << flags[0];
    EXPECT_NE(err.str().find("bench: keyring " + want), std::string::npos) << err.str();
  }
}

// The bench's config file (--conf FILE, --cluster-dir DIR's msgr.conf): [client] over
// [global], the command line over both. Seen through the keyring BenchMain loads (the
// loader fails, so it exits 2 before connecting).
TEST(BenchMainTest, SettingsFromTheConfigFileUnderTheCommandLine) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/bench_conf";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "/msgr.conf") << "[global]\nmon = 127.0.0.1:1\nkeyring = /global/k\n"
                                       "durability = memory   # an OSD setting: not ours\n"
                                       "[client]\nkeyring = /client/k\n[osd]\npollers = 2\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--conf", dir + "/msgr.conf"}, "/client/k"},
      {{"--cluster-dir", dir}, "/client/k"},
      {{"--cluster-dir", dir, "--keyring", "/flag/k"}, "/flag/k"},
      {{"verify", "--oids", "/x", "--conf=" + dir + "/msgr.conf"}, "/client/k"},
  };
  for (const auto& [args, want] : cases) {
    std::vector<std::string> loaded;
    auto loader = [&](const std::string& path) -> absl::StatusOr<AuthConfig> {
      loaded.push_back(path);
      return absl::NotFoundError("cannot read " + path);
    };
    std::ostringstream out, err;
    EXPECT_EQ(BenchMain(args, loader, out, err), 2) << err.str();
    EXPECT_EQ(loaded, std::vector<std::string>{want}) << args.back();
  }
  // A typo in [client] names the file, line and key.
  std::ofstream(dir + "/typo.conf") << "[client]\n\nop-timeuot = 3\n";
  std::ostringstream out, err;
  EXPECT_EQ(BenchMain({"--mon", "127.0.0.1:1", "--conf", dir + "/typo.conf"}, NoKeyrings, out,
                      err),
            2);
  EXPECT_NE(err.str().find(dir + "/typo.conf:3: unknown key 'op-timeuot' in [client]"),
            std::string::npos)
      << err.str();
  // Every key the bench takes from a file is a client setting (others ignore it there).
  for (const std::string& key : BenchConfKeys()) {
    EXPECT_EQ(mon::ConfKeysOf("client").count(key), 1u) << key;
  }
}

TEST(BenchMainTest, UnknownBackendIsAUsageError) {
  std::ostringstream out, err;
  EXPECT_EQ(BenchMain({"--mon", "127.0.0.1:1", "--ms-type", "carrier", "--auth", "none"},
                      NoKeyrings, out, err),
            2);
  EXPECT_NE(err.str().find("carrier"), std::string::npos) << err.str();
}

TEST(BenchMainTest, RandomGarbageNeverCrashes) {
  const std::vector<std::string> words = {"--mon", "h:1", "-b", "-t", "--seconds", "--count",
                                          "4K", "0", "-1", "x", "--verify", "verify", "--oids",
                                          "", "=", "--json=", "--mon=", "99999999999"};
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::string> args;
    int n = rng() % 7;
    for (int k = 0; k < n; ++k) args.push_back(words[rng() % words.size()]);
    auto a = ParseBenchArgs(args);  // must return, ok or not
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace msgr::bench
