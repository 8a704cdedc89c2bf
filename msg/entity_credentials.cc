#include "msg/entity_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "msg/base/errno_status.h"
#include "msg/handshake.h"
#include "msg/messenger.h"

namespace msgr {
namespace {

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
struct StoreCtxDeleter {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, StoreCtxDeleter>;

// Leaves the thread's OpenSSL error queue empty however the function returns: failed
// parses and checks queue errors that nothing here reads, and the messenger's threads
// make other OpenSSL calls (secure mode) that must not find stale ones.
struct ClearOpenSslErrors {
  ~ClearOpenSslErrors() { ERR_clear_error(); }
};

BioPtr MemBio(std::string_view s) {
  return BioPtr(BIO_new_mem_buf(s.data(), static_cast<int>(s.size())));
}

X509Ptr ParseCertPem(const std::string& pem) {
  BioPtr bio = MemBio(pem);
  if (bio == nullptr) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

X509Ptr ParseCertDer(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  X509* x = d2i_X509(nullptr, &p, static_cast<long>(der.size()));
  // Trailing bytes after the certificate are malformed input, not a certificate.
  if (x != nullptr && p != reinterpret_cast<const unsigned char*>(der.data()) + der.size()) {
    X509_free(x);
    return nullptr;
  }
  return X509Ptr(x);
}

PkeyPtr ParseKeyPem(const std::string& pem) {
  BioPtr bio = MemBio(pem);
  if (bio == nullptr) return nullptr;
  return PkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::string CommonName(X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  const int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (i < 0) return "";
  ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                     static_cast<size_t>(ASN1_STRING_length(data)));
}

// Reads a whole PKI file; a missing one says which command makes it.
absl::StatusOr<std::string> ReadPkiFile(const std::string& path, const std::string& what,
                                        const std::string& make_with) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("missing ", path, " (", what,
                                              "): make it with `", make_with,
                                              "` (tools/cluster.sh makes a cluster's"
                                              " certificates)"));
    }
    return ErrnoStatus(err, absl::StrCat("open ", path, " (", what, ")"));
  }
  std::string data;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) data.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return ErrnoStatus(err != 0 ? err : EIO, absl::StrCat("read ", path));
  if (data.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(path, " (", what, ") is empty"));
  }
  return data;
}

}  // namespace

bool CertNameAllows(std::string_view cert_name, const EntityName& claimed) {
  if (claimed.type == EntityType::kClient) return cert_name.substr(0, 7) == "client.";
  return cert_name == claimed.ToString();
}

EntityCredentials::~EntityCredentials() {
  X509_STORE_free(store_);
  EVP_PKEY_free(key_);
}

absl::StatusOr<std::shared_ptr<const EntityCredentials>> EntityCredentials::FromPem(
    std::string ca_pem, std::string cert_pem, std::string key_pem, const std::string& ca_what,
    const std::string& cert_what, const std::string& key_what, const std::string& expect_entity) {
  ClearOpenSslErrors clear_errors;
  X509Ptr ca = ParseCertPem(ca_pem);
  if (ca == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(ca_what, " is not a PEM certificate"));
  }
  X509Ptr cert = ParseCertPem(cert_pem);
  if (cert == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(cert_what, " is not a PEM certificate"));
  }
  PkeyPtr key = ParseKeyPem(key_pem);
  if (key == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(key_what, " is not a PEM private key"));
  }
  const std::string cn = CommonName(cert.get());
  if (!expect_entity.empty() && cn != expect_entity) {
    return absl::FailedPreconditionError(
        absl::StrCat(cert_what, " is the certificate of '", cn, "', not of ", expect_entity));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::FailedPreconditionError(absl::StrCat(key_what, " is not the key of ", cert_what));
  }
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  if (ca_key == nullptr || X509_verify(cert.get(), ca_key) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(cert_what, " is not signed by ", ca_what,
                     " (a certificate of another cluster? remove it and issue it again with"
                     " `bash tools/lib/pki.sh issue DIR ENTITY`)"));
  }
  for (X509* c : {ca.get(), cert.get()}) {
    if (X509_cmp_current_time(X509_get0_notAfter(c)) < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(c == ca.get() ? ca_what : cert_what, " has expired"));
    }
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert.get())) > 0) {
    return absl::FailedPreconditionError(absl::StrCat(cert_what, " is not valid yet (its start "
                                                      "date is in the future: check the clock)"));
  }
  unsigned char* der = nullptr;
  const int der_len = i2d_X509(cert.get(), &der);
  if (der_len <= 0) return absl::InternalError("cannot encode the certificate as DER");
  if (static_cast<size_t>(der_len) > kMaxEntityCertBytes) {
    OPENSSL_free(der);
    return absl::FailedPreconditionError(absl::StrCat(
        cert_what, " is ", der_len, " bytes (DER): the handshake carries at most ",
        kMaxEntityCertBytes, "; issue an EC certificate (tools/lib/pki.sh)"));
  }

  std::shared_ptr<EntityCredentials> c(new EntityCredentials());
  c->cert_der_.assign(reinterpret_cast<const char*>(der), static_cast<size_t>(der_len));
  OPENSSL_free(der);
  c->entity_ = cn;
  c->store_ = X509_STORE_new();
  if (c->store_ == nullptr || X509_STORE_add_cert(c->store_, ca.get()) != 1) {
    return absl::InternalError("cannot build the CA's certificate store");
  }
  c->key_ = key.release();
  c->ca_pem_ = std::move(ca_pem);
  c->cert_pem_ = std::move(cert_pem);
  c->key_pem_ = std::move(key_pem);
  return std::shared_ptr<const EntityCredentials>(std::move(c));
}

absl::StatusOr<std::shared_ptr<const EntityCredentials>> EntityCredentials::FromClusterDir(
    const std::string& cluster_dir, const std::string& entity) {
  if (cluster_dir.empty()) return absl::InvalidArgumentError("empty cluster directory");
  if (entity.empty()) return absl::InvalidArgumentError("empty entity name");
  const std::string pki = cluster_dir + "/pki";
  const std::string ca_path = pki + "/ca.crt";
  const std::string cert_path = absl::StrCat(pki, "/", entity, ".crt");
  const std::string key_path = absl::StrCat(pki, "/", entity, ".key");
  const std::string issue = absl::StrCat("bash tools/lib/pki.sh issue ", cluster_dir, " ", entity);

  auto ca = ReadPkiFile(ca_path, "the cluster CA",
                        absl::StrCat("bash tools/lib/pki.sh init ", cluster_dir));
  if (!ca.ok()) return ca.status();
  auto cert = ReadPkiFile(cert_path, absl::StrCat("the certificate of ", entity), issue);
  if (!cert.ok()) return cert.status();
  auto key = ReadPkiFile(key_path, absl::StrCat("the key of ", entity), issue);
  if (!key.ok()) return key.status();
  return FromPem(std::move(*ca), std::move(*cert), std::move(*key), ca_path, cert_path, key_path,
                 entity);
}

bool EntityCredentials::ClusterDirHasPki(const std::string& cluster_dir) {
  return !cluster_dir.empty() && access((cluster_dir + "/pki/ca.crt").c_str(), R_OK) == 0;
}

absl::StatusOr<std::string> EntityCredentials::Sign(std::string_view data) const {
  ClearOpenSslErrors clear_errors;
  MdCtxPtr ctx(EVP_MD_CTX_new());
  size_t len = 0;
  if (ctx == nullptr || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key_) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return absl::InternalError("cannot sign with the entity's key");
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return absl::InternalError("cannot sign with the entity's key");
  }
  sig.resize(len);
  return sig;
}

absl::StatusOr<std::string> EntityCredentials::VerifyPeer(std::string_view cert_der,
                                                          const EntityName& claimed,
                                                          std::string_view data,
                                                          std::string_view sig) const {
  ClearOpenSslErrors clear_errors;
  X509Ptr cert = ParseCertDer(cert_der);
  if (cert == nullptr) {
    return absl::UnauthenticatedError(
        absl::StrCat(claimed.ToString(), " sent no valid certificate"));
  }
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (ctx == nullptr || X509_STORE_CTX_init(ctx.get(), store_, cert.get(), nullptr) != 1) {
    return absl::InternalError("cannot set up certificate verification");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    return absl::UnauthenticatedError(absl::StrCat(
        "the certificate of ", claimed.ToString(), " is not valid for this cluster (",
        X509_verify_cert_error_string(err), "): issue it from this cluster's CA"));
  }
  const std::string cn = CommonName(cert.get());
  // The signature first: a peer that does not hold the key learns nothing of the roles.
  MdCtxPtr md(EVP_MD_CTX_new());
  if (md == nullptr ||
      EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr,
                           X509_get0_pubkey(cert.get())) != 1 ||
      EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                       reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return absl::UnauthenticatedError(
        absl::StrCat(claimed.ToString(), " (certificate '", cn,
                     "') failed to prove it holds that certificate's key"));
  }
  if (!CertNameAllows(cn, claimed)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "a peer with the certificate of '", cn, "' claimed to be ", claimed.ToString()));
  }
  return cn;
}

}  // namespace msgr
