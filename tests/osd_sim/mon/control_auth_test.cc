// ControlAuth::FromClusterDir and FromFlags on PKIs made by tools/lib/pki.sh: what loads,
// and the message for each wrong or missing file; pki.sh itself (key modes, idempotence).
#include "osd_sim/mon/control_auth.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "msg/base/file_util.h"
#include "tests/osd_sim/mon/pki_test_util.h"

namespace msgr::mon {
namespace {

using testing::MakeClusterPki;
using testing::MakeTempDir;
using testing::RunPki;

void Sh(const std::string& cmd) { ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd; }

TEST(ControlAuthTest, LoadsIssuedCertificate) {
  std::string dir = MakeClusterPki({"osd.0"});
  auto auth = ControlAuth::FromClusterDir(dir, "osd.0");
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE(auth->secure());
  EXPECT_EQ(auth->entity(), "osd.0");
  EXPECT_EQ(auth->ca_path(), dir + "/pki/ca.crt");
  EXPECT_NE(auth->ServerCredentials(), nullptr);
  EXPECT_NE(auth->ChannelCredentials(), nullptr);
  grpc::ChannelArguments args;
  auth->AddChannelArgs(&args);
  grpc_channel_args c = args.c_channel_args();
  bool has_override = false;
  for (size_t i = 0; i < c.num_args; ++i) {
    if (std::string(c.args[i].key) == GRPC_SSL_TARGET_NAME_OVERRIDE_ARG) {
      has_override = true;
      EXPECT_EQ(std::string(c.args[i].value.string), kMonTlsName);
    }
  }
  EXPECT_TRUE(has_override);
  EXPECT_FALSE(ControlAuth::Insecure().secure());
}

TEST(ControlAuthTest, MissingFilesAreNamed) {
  std::string empty = MakeTempDir();
  auto no_ca = ControlAuth::FromClusterDir(empty, "client.admin");
  ASSERT_FALSE(no_ca.ok());
  EXPECT_EQ(no_ca.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(no_ca.status().message(), "missing " + empty + "/pki/ca.crt"))
      << no_ca.status();
  EXPECT_TRUE(absl::StrContains(no_ca.status().message(), "pki.sh init " + empty))
      << no_ca.status();

  std::string dir = MakeClusterPki({});
  auto no_cert = ControlAuth::FromClusterDir(dir, "client.bench");
  ASSERT_FALSE(no_cert.ok());
  EXPECT_EQ(no_cert.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(no_cert.status().message(),
                                "missing " + dir + "/pki/client.bench.crt"))
      << no_cert.status();
  EXPECT_TRUE(absl::StrContains(no_cert.status().message(),
                                "pki.sh issue " + dir + " client.bench"))
      << no_cert.status();
  EXPECT_TRUE(absl::StrContains(no_cert.status().message(), "tools/cluster.sh"));

  RunPki("issue " + dir + " client.bench");
  Sh("rm " + dir + "/pki/client.bench.key");
  auto no_key = ControlAuth::FromClusterDir(dir, "client.bench");
  ASSERT_FALSE(no_key.ok());
  EXPECT_TRUE(absl::StrContains(no_key.status().message(),
                                "missing " + dir + "/pki/client.bench.key"))
      << no_key.status();
}

TEST(ControlAuthTest, WrongFilesAreNamed) {
  std::string dir = MakeClusterPki({"osd.0", "osd.1"});
  // osd.1's certificate under osd.0's name.
  Sh("cp " + dir + "/pki/osd.1.crt " + dir + "/pki/osd.0.crt");
  auto swapped = ControlAuth::FromClusterDir(dir, "osd.0");
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(swapped.status().message(), "is the certificate of 'osd.1'"))
      << swapped.status();
  // Another cluster's osd.0 certificate with this cluster's osd.1 key: the key is checked first.
  Sh("cp " + dir + "/pki/osd.1.key " + dir + "/pki/osd.0.key");
  Sh("rm " + dir + "/pki/osd.0.crt");
  std::string other = MakeClusterPki({"osd.0"});
  Sh("cp " + other + "/pki/osd.0.crt " + dir + "/pki/osd.0.crt");
  auto foreign = ControlAuth::FromClusterDir(dir, "osd.0");
  ASSERT_FALSE(foreign.ok());
  EXPECT_TRUE(absl::StrContains(foreign.status().message(), "is not the key of"))
      << foreign.status();
  Sh("cp " + other + "/pki/osd.0.key " + dir + "/pki/osd.0.key");
  auto other_ca = ControlAuth::FromClusterDir(dir, "osd.0");
  ASSERT_FALSE(other_ca.ok());
  EXPECT_TRUE(absl::StrContains(other_ca.status().message(),
                                "is not signed by " + dir + "/pki/ca.crt"))
      << other_ca.status();
  Sh("echo garbage > " + dir + "/pki/ca.crt");
  auto garbage = ControlAuth::FromClusterDir(dir, "osd.0");
  ASSERT_FALSE(garbage.ok());
  EXPECT_TRUE(absl::StrContains(garbage.status().message(), "ca.crt is not a PEM certificate"))
      << garbage.status();
}

TEST(ControlAuthTest, FromFlags) {
  auto none = ControlAuth::FromFlags("none", "", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->secure());
  EXPECT_EQ(ControlAuth::FromFlags("tls", "/x", "mon").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto no_dir = ControlAuth::FromFlags("secret", "", "mon");
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(no_dir.status().message(), "--cluster-dir"));
  std::string dir = MakeClusterPki({"mon"});
  auto secret = ControlAuth::FromFlags("secret", dir, "mon");
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(secret->Describe(), "mTLS as mon (CA " + dir + "/pki/ca.crt)");
}

TEST(PkiScriptTest, KeysPrivateAndFilesKept) {
  std::string dir = MakeClusterPki({"mon", "client.admin"});
  struct stat st;
  for (const char* key : {"ca.key", "mon.key", "client.admin.key"}) {
    ASSERT_EQ(::stat((dir + "/pki/" + key).c_str(), &st), 0) << key;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
  auto ca = ReadFile(dir + "/pki/ca.crt");
  auto mon = ReadFile(dir + "/pki/mon.crt");
  ASSERT_TRUE(ca.ok() && mon.ok());
  RunPki("init " + dir);
  RunPki("issue " + dir + " mon");
  EXPECT_EQ(*ReadFile(dir + "/pki/ca.crt"), *ca);
  EXPECT_EQ(*ReadFile(dir + "/pki/mon.crt"), *mon);
  // issue never makes a CA, and refuses names that are not entity names.
  std::string fresh = MakeTempDir();
  EXPECT_NE(std::system(("bash " + std::string(testing::kPkiScript) + " issue " + fresh +
                         " mon 2>/dev/null").c_str()),
            0);
  EXPECT_NE(std::system(("bash " + std::string(testing::kPkiScript) + " issue " + dir +
                         " ../evil 2>/dev/null").c_str()),
            0);
}

}  // namespace
}  // namespace msgr::mon
