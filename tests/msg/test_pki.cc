#include "tests/msg/test_pki.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace msgr::testing {
namespace {

std::string ToPem(int (*write)(BIO*, void*), void* obj) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (write(bio, obj) != 1) std::abort();
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

std::string CertPem(X509* x) {
  return ToPem([](BIO* b, void* o) { return PEM_write_bio_X509(b, static_cast<X509*>(o)); }, x);
}

std::string KeyPem(EVP_PKEY* k) {
  return ToPem(
      [](BIO* b, void* o) {
        return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(o), nullptr, nullptr, 0,
                                        nullptr, nullptr);
      },
      k);
}

EVP_PKEY* ParseKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* k = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return k;
}

X509* ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return x;
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr || X509_add_ext(cert, ext, -1) != 1) std::abort();
  X509_EXTENSION_free(ext);
}

// A certificate for `cn` with `key`, signed by (issuer, issuer_key); self-signed when
// issuer is null.
X509* MakeCert(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
               bool ca, int days_valid) {
  X509* x = X509_new();
  X509_set_version(x, 2);
  uint64_t serial = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial));
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial >> 1);
  if (days_valid >= 0) {
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), static_cast<long>(days_valid) * 86400);
  } else {
    X509_gmtime_adj(X509_getm_notBefore(x), -2 * 86400);
    X509_gmtime_adj(X509_getm_notAfter(x), -86400);
  }
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("msgr"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509_set_pubkey(x, key);
  X509* iss = issuer != nullptr ? issuer : x;
  if (ca) {
    AddExt(x, iss, NID_basic_constraints, "critical,CA:TRUE");
    AddExt(x, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExt(x, iss, NID_basic_constraints, "critical,CA:FALSE");
    AddExt(x, iss, NID_key_usage, "critical,digitalSignature");
    AddExt(x, iss, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  if (X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) std::abort();
  return x;
}

}  // namespace

TestPki::TestPki() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* ca = MakeCert("msgr test CA", key, nullptr, nullptr, true, 30);
  ca_ = PemPair{CertPem(ca), KeyPem(key)};
  X509_free(ca);
  EVP_PKEY_free(key);
}

PemPair TestPki::Issue(const std::string& entity, int days_valid) const {
  EVP_PKEY* ca_key = ParseKey(ca_.key_pem);
  X509* ca = ParseCert(ca_.cert_pem);
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = MakeCert(entity, key, ca, ca_key, false, days_valid);
  PemPair out{CertPem(cert), KeyPem(key)};
  X509_free(cert);
  EVP_PKEY_free(key);
  X509_free(ca);
  EVP_PKEY_free(ca_key);
  return out;
}

std::shared_ptr<const EntityCredentials> TestPki::Credentials(const std::string& entity) const {
  PemPair p = Issue(entity);
  auto c = EntityCredentials::FromPem(ca_.cert_pem, p.cert_pem, p.key_pem);
  if (!c.ok()) {
    ADD_FAILURE() << c.status();
    std::abort();
  }
  return *c;
}

AuthConfig TestPki::Auth(const std::string& secret, const std::string& entity) const {
  AuthConfig a{AuthConfig::Mode::kSecret, secret};
  a.entity = Credentials(entity);
  return a;
}

void TestPki::WriteClusterDir(const std::string& dir,
                              const std::vector<std::string>& entities) const {
  const std::string pki = dir + "/pki";
  mkdir(dir.c_str(), 0700);
  mkdir(pki.c_str(), 0700);
  std::ofstream(pki + "/ca.crt") << ca_.cert_pem;
  for (const std::string& e : entities) {
    PemPair p = Issue(e);
    std::ofstream(pki + "/" + e + ".crt") << p.cert_pem;
    std::ofstream(pki + "/" + e + ".key") << p.key_pem;
  }
}

}  // namespace msgr::testing
