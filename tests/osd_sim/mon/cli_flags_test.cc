// The shared command-line parser (osd_sim/mon/cli_flags.h): both spellings of a flag and of
// its name, bools, short names, positional words and `--`, errors as a Status (never an
// exit), and a config file's settings under the command line's.
#include "osd_sim/mon/cli_flags.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, mon, "", "monitor HOST:PORT");
ABSL_FLAG(uint64_t, timeout_ms, 5000, "milliseconds");
ABSL_FLAG(uint64_t, pg_num, 0, "placement groups");
ABSL_FLAG(int, threads, 1, "worker threads");
ABSL_FLAG(double, seconds, 10, "run time");
ABSL_FLAG(bool, verify, false, "read back");
ABSL_FLAG(std::string, object_size, "4M", "object size");
ABSL_FLAG(std::string, public_addr, "", "address");
ABSL_FLAG(std::string, public_network, "", "network");

namespace msgr::mon {
namespace {

using Args = std::vector<std::string>;

TEST(CliFlagsTest, ParsesBothFormsAndPositionals) {
  absl::FlagSaver saver;
  const char* argv[] = {"x", "--mon", "h:1", "--timeout-ms=20", "out", "3"};
  auto f = ParseFlags(6, const_cast<char**>(argv));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_mon), "h:1");
  EXPECT_EQ(absl::GetFlag(FLAGS_timeout_ms), 20u);
  EXPECT_EQ(f->positional(), (Args{"out", "3"}));
  EXPECT_TRUE(f->Given("mon"));
  EXPECT_TRUE(f->Given("timeout_ms")) << "either spelling of the name";
  EXPECT_FALSE(f->Given("pg-num"));
  EXPECT_FALSE(f->help());
}

TEST(CliFlagsTest, NamesTakeDashesOrUnderscoresAndOneDashOrTwo) {
  absl::FlagSaver saver;
  auto f = ParseFlags(Args{"--timeout_ms", "7", "-pg-num=3", "--public-addr", "a"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_timeout_ms), 7u);
  EXPECT_EQ(absl::GetFlag(FLAGS_pg_num), 3u);
  EXPECT_EQ(absl::GetFlag(FLAGS_public_addr), "a");
}

TEST(CliFlagsTest, TheLastOfARepeatedFlagWins) {
  absl::FlagSaver saver;
  auto f = ParseFlags(Args{"--mon", "a:1", "--mon=b:2"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_mon), "b:2");
  EXPECT_EQ(f->GivenAt("mon"), 2);
  EXPECT_EQ(f->GivenAt("pg-num"), -1);
}

TEST(CliFlagsTest, BoolsTakeNoValueOrTrueOrFalseOrTheNoPrefix) {
  for (const auto& [args, want] : std::vector<std::pair<Args, bool>>{
           {{"--verify"}, true},
           {{"--verify=true"}, true},
           {{"--verify=false"}, false},
           {{"--verify", "--noverify"}, false},
           {{"--noverify", "--verify"}, true}}) {
    absl::FlagSaver saver;
    absl::SetFlag(&FLAGS_verify, !want);
    auto f = ParseFlags(args);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(absl::GetFlag(FLAGS_verify), want) << args.back();
    EXPECT_TRUE(f->Given("verify"));
  }
  absl::FlagSaver saver;
  // A bool never takes the next word: it stays positional.
  auto f = ParseFlags(Args{"--verify", "false"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(absl::GetFlag(FLAGS_verify));
  EXPECT_EQ(f->positional(), Args{"false"});
  auto yes = ParseFlags(Args{"--verify=yes"});
  EXPECT_EQ(yes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(yes.status().message().find("--verify takes true or false"), std::string::npos)
      << yes.status();
  EXPECT_FALSE(ParseFlags(Args{"--noverify=true"}).ok());
  EXPECT_FALSE(ParseFlags(Args{"--nomon"}).ok()) << "--no only negates a bool";
}

TEST(CliFlagsTest, ShortNamesStandForAFlag) {
  absl::FlagSaver saver;
  FlagParseOptions options;
  options.short_names = {{"b", "object_size"}, {"t", "threads"}};
  auto f = ParseFlags(Args{"-b", "4K", "-t=8"}, options);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_object_size), "4K");
  EXPECT_EQ(absl::GetFlag(FLAGS_threads), 8);
  EXPECT_TRUE(f->Given("object-size"));
  // The error names the flag as it was written.
  auto bad = ParseFlags(Args{"-t", "x"}, options);
  EXPECT_EQ(bad.status().message(), "-t wants an integer, got 'x'");
  EXPECT_EQ(ParseFlags(Args{"-b", "4K"}).status().message(), "unknown flag -b")
      << "without the alias";
}

TEST(CliFlagsTest, HelpAndTheEndOfFlags) {
  absl::FlagSaver saver;
  auto f = ParseFlags(Args{"-h"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->help());
  EXPECT_TRUE(ParseFlags(Args{"--mon", "h:1", "--help"})->help());
  auto end = ParseFlags(Args{"word", "--mon", "h:1", "--", "--pg-num", "-", "x"});
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->positional(), (Args{"word", "--pg-num", "-", "x"}));
  EXPECT_FALSE(end->Given("pg-num"));
  auto dash = ParseFlags(Args{"-", "a"});
  ASSERT_TRUE(dash.ok()) << dash.status();
  EXPECT_EQ(dash->positional(), (Args{"-", "a"})) << "'-' (stdin) is a word";
}

TEST(CliFlagsTest, RejectsUnknownFlagsMissingValuesAndBadNumbers) {
  absl::FlagSaver saver;
  auto unknown = ParseFlags(Args{"--nope", "1"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "unknown flag --nope");
  EXPECT_EQ(ParseFlags(Args{"--no_such=1"}).status().message(), "unknown flag --no-such");
  FlagParseOptions bench_wording;
  bench_wording.unknown_as_argument = true;
  EXPECT_EQ(ParseFlags(Args{"--no-such=1"}, bench_wording).status().message(),
            "unknown argument '--no-such=1'");
  auto missing = ParseFlags(Args{"--mon"});
  EXPECT_NE(missing.status().message().find("--mon needs a value"), std::string::npos)
      << missing.status();
  for (const Args& args : {Args{"--pg-num", "12x"}, Args{"--pg-num=-1"},
                           Args{"--pg-num", "99999999999999999999999"}, Args{"--seconds=x"}}) {
    auto bad = ParseFlags(args);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << args[0];
    EXPECT_NE(bad.status().message().find(args[0].substr(0, args[0].find('='))),
              std::string::npos)
        << bad.status();
  }
  EXPECT_EQ(ParseFlags(Args{"--pg-num", "12x"}).status().message(),
            "--pg-num wants a non-negative integer, got '12x'");
  EXPECT_EQ(ParseFlags(Args{"--seconds", "soon"}).status().message(),
            "--seconds wants a number, got 'soon'");
  // Abseil's own flags are not ours: no --flagfile reading files behind our back.
  EXPECT_EQ(ParseFlags(Args{"--flagfile=/etc/passwd"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CliFlagsTest, ConfigFileSettingsStayUnderTheCommandLine) {
  absl::FlagSaver saver;
  auto f = ParseFlags(Args{"--mon", "cli:1"});
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->ApplyDefaults({{"mon", "conf:1"}, {"timeout-ms", "200"}}).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_mon), "cli:1");
  EXPECT_EQ(absl::GetFlag(FLAGS_timeout_ms), 200u);
  EXPECT_TRUE(f->Has("timeout-ms"));
  EXPECT_FALSE(f->Given("timeout-ms"));
  EXPECT_FALSE(f->Has("pg-num"));
  // A file's bad value or unknown key names the flag.
  auto bad = f->ApplyDefaults({{"pg-num", "many"}});
  EXPECT_EQ(bad.message(), "--pg-num wants a non-negative integer, got 'many'");
  EXPECT_EQ(f->ApplyDefaults({{"no-such", "1"}}).code(), absl::StatusCode::kInvalidArgument);
}

// An address and the network to pick it from: the command line's one replaces the file's
// other, and in a file the first given stays (as CliFlags::SetDefaults did).
TEST(CliFlagsTest, AnAlternativeOnTheCommandLineReplacesTheFilesOther) {
  {
    absl::FlagSaver saver;
    auto f = ParseFlags(Args{"--public-addr", "198.18.0.20"});
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->ApplyDefaults({{"public-network", "198.18.0.0/24"}}).ok());
    EXPECT_EQ(absl::GetFlag(FLAGS_public_addr), "198.18.0.20");
    EXPECT_FALSE(f->Has("public-network"));
    EXPECT_EQ(absl::GetFlag(FLAGS_public_network), "");
  }
  {
    absl::FlagSaver saver;
    auto f = ParseFlags(Args{"--public-network=10.0.0.0/8"});
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->ApplyDefaults({{"public-addr", "10.1.1.1"}}).ok());
    EXPECT_FALSE(f->Has("public-addr"));
    EXPECT_EQ(absl::GetFlag(FLAGS_public_addr), "");
  }
  {
    absl::FlagSaver saver;
    auto f = ParseFlags(Args{});
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->ApplyDefaults({{"public-addr", "10.1.1.1"}, {"public-network", "10/8"}}).ok());
    EXPECT_TRUE(f->Has("public-addr"));
    EXPECT_FALSE(f->Has("public-network"));
  }
}

TEST(CliFlagsTest, ResetFlagsDefinedInPutsThisFilesFlagsBackToTheirDefaults) {
  absl::FlagSaver saver;
  ASSERT_TRUE(ParseFlags(Args{"--mon=h:9", "--verify", "--seconds=2.5", "--pg-num=4"}).ok());
  ResetFlagsDefinedIn(__FILE__);
  EXPECT_EQ(absl::GetFlag(FLAGS_mon), "");
  EXPECT_FALSE(absl::GetFlag(FLAGS_verify));
  EXPECT_EQ(absl::GetFlag(FLAGS_seconds), 10);
  EXPECT_EQ(absl::GetFlag(FLAGS_pg_num), 0u);
  EXPECT_EQ(absl::GetFlag(FLAGS_timeout_ms), 5000u);
}

TEST(CliFlagsTest, FlagsHelpListsOurFlagsWithDashes) {
  const std::string help = FlagsHelp();
  EXPECT_NE(help.find("  --timeout-ms  milliseconds (default: 5000)\n"), std::string::npos)
      << help;
  EXPECT_NE(help.find("  --mon  monitor HOST:PORT\n"), std::string::npos) << help;
  EXPECT_EQ(help.find("flagfile"), std::string::npos) << "Abseil's own are not ours";
}

TEST(CliFlagsTest, FlagValueTextReadsAFlagByName) {
  absl::FlagSaver saver;
  ASSERT_TRUE(ParseFlags(Args{"--mon=h:9"}).ok());
  EXPECT_EQ(FlagValueText("mon"), "h:9");
  EXPECT_EQ(FlagValueText("timeout-ms"), "5000");
  EXPECT_EQ(FlagValueText("no-such"), "");
}

}  // namespace
}  // namespace msgr::mon
