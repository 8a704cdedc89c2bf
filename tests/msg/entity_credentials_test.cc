#include "msg/entity_credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/msg/test_pki.h"

namespace msgr {
namespace {

using testing::TestPki;

const EntityName kOsd3{EntityType::kOsd, 3};

TEST(EntityCredentialsTest, SignsAndThePeerVerifiesUnderTheSameCa) {
  TestPki pki;
  auto osd3 = pki.Credentials("osd.3");
  auto osd0 = pki.Credentials("osd.0");
  EXPECT_EQ(osd3->entity(), "osd.3");
  auto sig = osd3->Sign("handshake bytes");
  ASSERT_TRUE(sig.ok()) << sig.status();
  auto cn = osd0->VerifyPeer(osd3->cert_der(), kOsd3, "handshake bytes", *sig);
  ASSERT_TRUE(cn.ok()) << cn.status();
  EXPECT_EQ(*cn, "osd.3");
  // Other bytes, a damaged signature or a damaged certificate: refused.
  EXPECT_TRUE(absl::IsUnauthenticated(
      osd0->VerifyPeer(osd3->cert_der(), kOsd3, "other bytes", *sig).status()));
  std::string bad = *sig;
  bad[bad.size() / 2] ^= 1;
  EXPECT_TRUE(absl::IsUnauthenticated(
      osd0->VerifyPeer(osd3->cert_der(), kOsd3, "handshake bytes", bad).status()));
  std::string cert = osd3->cert_der();
  EXPECT_TRUE(absl::IsUnauthenticated(
      osd0->VerifyPeer(cert.substr(0, cert.size() - 3), kOsd3, "handshake bytes", *sig)
          .status()));
  EXPECT_TRUE(absl::IsUnauthenticated(
      osd0->VerifyPeer("garbage", kOsd3, "handshake bytes", *sig).status()));
}

TEST(EntityCredentialsTest, RolesAnOsdOnlyAsItselfAnyClientCertificateAsAClient) {
  EXPECT_TRUE(CertNameAllows("osd.3", kOsd3));
  EXPECT_FALSE(CertNameAllows("osd.30", kOsd3));
  EXPECT_FALSE(CertNameAllows("client.admin", kOsd3));
  EXPECT_TRUE(CertNameAllows("client.bench", EntityName{EntityType::kClient, 4711}));
  EXPECT_FALSE(CertNameAllows("osd.3", EntityName{EntityType::kClient, 3}));
  EXPECT_FALSE(CertNameAllows("mon", EntityName{EntityType::kClient, 1}));

  TestPki pki;
  auto bench = pki.Credentials("client.bench");
  auto osd0 = pki.Credentials("osd.0");
  auto sig = bench->Sign("x");
  ASSERT_TRUE(sig.ok());
  auto as_osd = osd0->VerifyPeer(bench->cert_der(), kOsd3, "x", *sig);
  EXPECT_TRUE(absl::IsPermissionDenied(as_osd.status())) << as_osd.status();
  EXPECT_TRUE(osd0->VerifyPeer(bench->cert_der(), EntityName{EntityType::kClient, 9}, "x", *sig)
                  .ok());
}

TEST(EntityCredentialsTest, ACertificateOfAnotherCaOrExpiredIsRefused) {
  TestPki ours, theirs;
  auto verifier = ours.Credentials("osd.0");
  auto stranger = theirs.Credentials("osd.3");
  auto sig = stranger->Sign("x");
  ASSERT_TRUE(sig.ok());
  auto r = verifier->VerifyPeer(stranger->cert_der(), kOsd3, "x", *sig);
  EXPECT_TRUE(absl::IsUnauthenticated(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("not valid for this cluster"), std::string::npos);

  // Loading: an expired certificate, a key of another certificate, a certificate of
  // another CA, and text that is no PEM are refused, naming what is wrong.
  testing::PemPair expired = ours.Issue("osd.1", -1);
  auto e = EntityCredentials::FromPem(ours.ca_pem(), expired.cert_pem, expired.key_pem, "ca.crt",
                                      "osd.1.crt", "osd.1.key");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(std::string(e.status().message()), "osd.1.crt has expired");
  testing::PemPair a = ours.Issue("osd.1"), b = ours.Issue("osd.1");
  auto k = EntityCredentials::FromPem(ours.ca_pem(), a.cert_pem, b.key_pem, "ca.crt",
                                      "osd.1.crt", "osd.1.key");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(std::string(k.status().message()), "osd.1.key is not the key of osd.1.crt");
  testing::PemPair other = theirs.Issue("osd.1");
  auto o = EntityCredentials::FromPem(ours.ca_pem(), other.cert_pem, other.key_pem, "ca.crt",
                                      "osd.1.crt", "osd.1.key");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("osd.1.crt is not signed by ca.crt"), std::string::npos);
  auto g = EntityCredentials::FromPem("garbage", a.cert_pem, a.key_pem, "ca.crt");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(std::string(g.status().message()), "ca.crt is not a PEM certificate");
}

TEST(EntityCredentialsTest, FromClusterDirFindsTheFilesAndSaysHowToMakeMissingOnes) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/cluster";
  TestPki pki;
  EXPECT_FALSE(EntityCredentials::ClusterDirHasPki(dir));
  pki.WriteClusterDir(dir, {"osd.0", "client.bench"});
  EXPECT_TRUE(EntityCredentials::ClusterDirHasPki(dir));
  auto c = EntityCredentials::FromClusterDir(dir, "osd.0");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->entity(), "osd.0");
  EXPECT_EQ((*c)->ca_pem(), pki.ca_pem());

  auto missing = EntityCredentials::FromClusterDir(dir, "osd.7");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find(
                "make it with `bash tools/lib/pki.sh issue " + dir + " osd.7`"),
            std::string::npos)
      << missing.status();

  // osd.1's files holding osd.0's certificate: named.
  std::ifstream crt(dir + "/pki/osd.0.crt"), key(dir + "/pki/osd.0.key");
  std::ofstream(dir + "/pki/osd.1.crt") << crt.rdbuf();
  std::ofstream(dir + "/pki/osd.1.key") << key.rdbuf();
  auto wrong = EntityCredentials::FromClusterDir(dir, "osd.1");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(std::string(wrong.status().message()),
            dir + "/pki/osd.1.crt is the certificate of 'osd.0', not of osd.1");
}

}  // namespace
}  // namespace msgr
