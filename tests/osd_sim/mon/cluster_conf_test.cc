// msgr.conf (osd_sim/mon/cluster_conf.h): sections and precedence, comments and the
// spellings of a key, errors naming file and line, unknown keys, and the file found by
// --conf / --cluster-dir put under the command line.
#include "osd_sim/mon/cluster_conf.h"

#include "osd_sim/mon/cli_flags.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

// The OSD's address flags, for the command line over the file (ParseFlags sets them).
ABSL_FLAG(std::string, public_addr, "", "address");
ABSL_FLAG(std::string, public_network, "", "network");
ABSL_FLAG(std::string, cluster_addr, "", "address");
ABSL_FLAG(std::string, cluster_network, "", "network");

namespace msgr::mon {
namespace {

using Settings = std::map<std::string, std::string>;

const std::set<std::string> kOsdKeys = {"ms-type", "durability", "pollers", "auth",
                                        "poller-wakeup-us"};

constexpr char kConf[] = R"(# msgr.conf
[global]
auth = secret
ms type = tcp            ; a comment after a blank
grace-ms = 3000          # the monitor's, in [global]: the OSD ignores it

[osd]
ms_type = rdma
durability = "buffered"
pollers = 2

[osd.1]
durability = memory
  poller-wakeup-us=500

[mon]
grace-ms = 5000
no-such-key = 1          # [mon] is not the OSD's: it ignores this
)";

std::string TmpDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ClusterConfTest, OsdKSectionOverOsdOverGlobal) {
  auto conf = ClusterConf::Parse(kConf, "msgr.conf");
  ASSERT_TRUE(conf.ok()) << conf.status();
  auto osd1 = conf->SettingsFor("osd", "1", kOsdKeys);
  ASSERT_TRUE(osd1.ok()) << osd1.status();
  EXPECT_EQ(*osd1, (Settings{{"auth", "secret"},
                             {"ms-type", "rdma"},
                             {"durability", "memory"},
                             {"pollers", "2"},
                             {"poller-wakeup-us", "500"}}));
  auto osd0 = conf->SettingsFor("osd", "0", kOsdKeys);
  ASSERT_TRUE(osd0.ok()) << osd0.status();
  EXPECT_EQ(*osd0, (Settings{{"auth", "secret"},
                             {"ms-type", "rdma"},
                             {"durability", "buffered"},
                             {"pollers", "2"}}));
}

// An address and the network to pick it from say one thing two ways: the more specific
// layer's wins whichever of the two it gives (join writes [osd.K] public-addr under a
// cluster-wide [osd] public-network), on the command line too.
TEST(ClusterConfTest, AnAddressOverridesAWiderLayersNetworkAndBack) {
  const std::set<std::string> keys = {"public-addr", "public-network", "cluster-addr",
                                      "cluster-network"};
  auto conf = ClusterConf::Parse(
      "[osd]\npublic-network = 198.18.0.0/24\ncluster-addr = 10.0.0.9\n"
      "[osd.3]\npublic-addr = 198.18.0.13\ncluster-network = 10.1.0.0/16\n",
      "msgr.conf");
  ASSERT_TRUE(conf.ok()) << conf.status();
  auto osd3 = conf->SettingsFor("osd", "3", keys);
  ASSERT_TRUE(osd3.ok()) << osd3.status();
  EXPECT_EQ(*osd3, (Settings{{"public-addr", "198.18.0.13"}, {"cluster-network", "10.1.0.0/16"}}));
  auto osd4 = conf->SettingsFor("osd", "4", keys);
  EXPECT_EQ(*osd4, (Settings{{"public-network", "198.18.0.0/24"}, {"cluster-addr", "10.0.0.9"}}));

  absl::FlagSaver saver;
  const char* argv[] = {"osd", "--public-addr", "198.18.0.20"};
  auto flags = ParseFlags(3, const_cast<char**>(argv));
  ASSERT_TRUE(flags.ok()) << flags.status();
  ASSERT_TRUE(flags->ApplyDefaults(*osd4).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_public_addr), "198.18.0.20");
  EXPECT_FALSE(flags->Has("public-network")) << "the command line's address replaces it";
  EXPECT_EQ(absl::GetFlag(FLAGS_public_network), "");
  EXPECT_EQ(absl::GetFlag(FLAGS_cluster_addr), "10.0.0.9");
}

TEST(ClusterConfTest, AClientSeesGlobalAndClientOnly) {
  auto conf = ClusterConf::Parse("[global]\nms-type = tcp\ndurability = memory\n"
                                 "[client]\nms-type = rdma\n[osd]\npollers = 4\n",
                                 "msgr.conf");
  ASSERT_TRUE(conf.ok()) << conf.status();
  auto client = conf->SettingsFor("client", "", {"ms-type", "mon"});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(*client, (Settings{{"ms-type", "rdma"}}));
}

TEST(ClusterConfTest, KeySpellingsAreOneKey) {
  EXPECT_EQ(NormalizeConfKey("ms type"), "ms-type");
  EXPECT_EQ(NormalizeConfKey("ms_type"), "ms-type");
  EXPECT_EQ(NormalizeConfKey("  ms-type "), "ms-type");
  EXPECT_EQ(NormalizeConfKey("rdma max_registered  mb"), "rdma-max-registered-mb");
  auto dup = ClusterConf::Parse("[osd]\nms-type = tcp\nms_type = rdma\n", "x/msgr.conf");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(),
            "x/msgr.conf:3: 'ms-type' given twice in [osd] (first at line 2)");
}

TEST(ClusterConfTest, BadLinesNameFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[global]\nauth = secret\n\nms-type tcp\n", "msgr.conf:4: no '=' in line"},
      {"[osd.x]\n", "msgr.conf:1: unknown section [osd.x] (want [global], [mon], [osd], "
                    "[osd.K] or [client])"},
      {"# top\n[client.admin]\n", "msgr.conf:2: unknown section [client.admin]"},
      {"[osd\n", "msgr.conf:1: no ']' closing section [osd"},
      {"ms-type = tcp\n", "msgr.conf:1: 'ms-type' before any section"},
      {"[global]\nauth =\n", "msgr.conf:2: 'auth' has no value"},
      {"[global]\n = tcp\n", "msgr.conf:2: no key before '='"},
  };
  for (const auto& [text, want] : cases) {
    auto conf = ClusterConf::Parse(text, "msgr.conf");
    ASSERT_FALSE(conf.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(conf.status()));
    EXPECT_EQ(conf.status().message().substr(0, want.size()), want) << conf.status();
  }
}

TEST(ClusterConfTest, CommentsAndQuotes) {
  auto conf = ClusterConf::Parse(
      "; leading\n[osd] # after a section\n  # indented\nhost = a#b\ncapacity = \"1 # 2\"\n",
      "msgr.conf");
  ASSERT_TRUE(conf.ok()) << conf.status();
  auto s = conf->SettingsFor("osd", "", {"host", "capacity"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (Settings{{"host", "a#b"}, {"capacity", "1 # 2"}}));
}

TEST(ClusterConfTest, UnknownKeyIsAnErrorNamingFileLineAndKey) {
  // A typo in the OSD's own section.
  auto conf = ClusterConf::Parse("[global]\nauth = none\n[osd]\ndurabilty = memory\n", "m.conf");
  ASSERT_TRUE(conf.ok()) << conf.status();
  auto s = conf->SettingsFor("osd", "0", ConfKeysOf("osd"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "m.conf:4: unknown key 'durabilty' in [osd]: not a setting of osd");
  // ... is not the monitor's business: [osd] is not its section.
  EXPECT_TRUE(conf->SettingsFor("mon", "", ConfKeysOf("mon")).ok());

  // In [global], another kind of process's key is ignored; a key nobody takes is not.
  conf = ClusterConf::Parse("[global]\ngrace-ms = 10\ndurability = memory\n", "m.conf");
  ASSERT_TRUE(conf.ok());
  auto mon = conf->SettingsFor("mon", "", ConfKeysOf("mon"));
  ASSERT_TRUE(mon.ok()) << mon.status();
  EXPECT_EQ(*mon, (Settings{{"grace-ms", "10"}}));
  conf = ClusterConf::Parse("[global]\n\nms-typo = tcp\n", "m.conf");
  ASSERT_TRUE(conf.ok());
  for (const char* type : {"mon", "osd", "client"}) {
    auto r = conf->SettingsFor(type, "", ConfKeysOf(type));
    ASSERT_FALSE(r.ok()) << type;
    EXPECT_EQ(r.status().message(),
              absl::StrCat("m.conf:3: unknown key 'ms-typo' in [global]: not a setting of ", type,
                           " nor of any other process"));
  }

  // In [client], another client tool's key (monctl's timeout-ms) is ignored by the bench.
  conf = ClusterConf::Parse("[client]\ntimeout-ms = 100\nop-timeout = 5\n", "m.conf");
  ASSERT_TRUE(conf.ok());
  auto bench = conf->SettingsFor("client", "", {"op-timeout"});
  ASSERT_TRUE(bench.ok()) << bench.status();
  EXPECT_EQ(*bench, (Settings{{"op-timeout", "5"}}));
}

TEST(ClusterConfTest, TheDaemonsKeysAreDistinctWhereTheyMustBe) {
  // Flags that only the command line can give are not settings.
  EXPECT_EQ(ConfKeysOf("osd").count("id"), 0u);
  EXPECT_EQ(ConfKeysOf("osd").count("conf"), 0u);
  EXPECT_EQ(ConfKeysOf("osd").count("durability"), 1u);
  EXPECT_EQ(ConfKeysOf("mon").count("grace-ms"), 1u);
  EXPECT_EQ(ConfKeysOf("client").count("ms-type"), 1u);
  EXPECT_TRUE(ConfKeysOf("rgw").empty());
}

TEST(ClusterConfTest, FileFoundByConfOrClusterDir) {
  const std::string dir = absl::StrCat(TmpDir(), "/conf_test_dir");
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", dir).c_str()), 0);
  EXPECT_EQ(ConfPathFor("", dir), "");  // no DIR/msgr.conf yet
  EXPECT_EQ(ConfPathFor("", ""), "");
  WriteFile(dir + "/msgr.conf", "[global]\nms-type = rdma\n[client]\nop-timeout = 7\n");
  EXPECT_EQ(ConfPathFor("", dir), dir + "/msgr.conf");
  EXPECT_EQ(ConfPathFor("/other.conf", dir), "/other.conf");

  // The command line overrides the file: settings go first, as --key=value.
  auto args = WithConfSettings({"verify", "--cluster-dir", dir, "--ms-type=tcp"}, 1, "client",
                               {"ms-type", "op-timeout"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::vector<std::string>{"verify", "--ms-type=rdma", "--op-timeout=7",
                                             "--cluster-dir", dir, "--ms-type=tcp"}));
  // Abseil's spellings of the flags find it too.
  args = WithConfSettings({"prog", "-cluster_dir=" + dir}, 1, "client", {"ms-type"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::vector<std::string>{"prog", "--ms-type=rdma", "-cluster_dir=" + dir}));

  // --conf FILE must be there; a bad file stops the process with its line.
  auto missing = WithConfSettings({"--conf", dir + "/nope.conf"}, 0, "client", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("nope.conf"), std::string::npos);
  WriteFile(dir + "/bad.conf", "[client]\nms-typo = tcp\n");
  auto bad = WithConfSettings({"--conf=" + dir + "/bad.conf"}, 0, "client", {"ms-type"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), absl::StrCat(dir, "/bad.conf:2: unknown key 'ms-typo' in "
                                                      "[client]: not a setting of client"));
  // No file: the arguments as they were.
  args = WithConfSettings({"--mon", "h:1"}, 0, "client", {"mon"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, (std::vector<std::string>{"--mon", "h:1"}));
}

}  // namespace
}  // namespace msgr::mon
