#include "osd_sim/mon/control_auth.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "osd_sim/mon/file_util.h"

namespace msgr::mon {
namespace {

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

std::string PkiDir(const std::string& cluster_dir) { return cluster_dir + "/pki"; }

// Reads one PKI file; a missing one says which command makes it.
absl::StatusOr<std::string> ReadPkiFile(const std::string& path, const std::string& what,
                                        const std::string& make_with) {
  absl::StatusOr<std::string> data = ReadFile(path);
  if (absl::IsNotFound(data.status())) {
    return absl::NotFoundError(absl::StrCat("missing ", path, " (", what, "): make it with `",
                                            make_with, "` (tools/cluster.sh makes a cluster's"
                                            " certificates)"));
  }
  if (!data.ok()) return data.status();
  if (data->empty()) {
    return absl::FailedPreconditionError(absl::StrCat(path, " (", what, ") is empty"));
  }
  return data;
}

X509Ptr ParseCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(),
                                                                static_cast<int>(pem.size())),
                                                &BIO_free);
  if (bio == nullptr) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

PkeyPtr ParseKey(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(),
                                                                static_cast<int>(pem.size())),
                                                &BIO_free);
  if (bio == nullptr) return nullptr;
  return PkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::string CommonName(X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (i < 0) return "";
  ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                     static_cast<size_t>(ASN1_STRING_length(data)));
}

// The checks a TLS handshake would make anyway, made now so the message names the file.
absl::Status CheckFiles(const std::string& entity, const std::string& ca_path,
                        const std::string& ca_pem, const std::string& cert_path,
                        const std::string& cert_pem, const std::string& key_path,
                        const std::string& key_pem) {
  X509Ptr ca = ParseCert(ca_pem);
  if (ca == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(ca_path, " is not a PEM certificate"));
  }
  X509Ptr cert = ParseCert(cert_pem);
  if (cert == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(cert_path, " is not a PEM certificate"));
  }
  PkeyPtr key = ParseKey(key_pem);
  if (key == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(key_path, " is not a PEM private key"));
  }
  const std::string cn = CommonName(cert.get());
  if (cn != entity) {
    return absl::FailedPreconditionError(
        absl::StrCat(cert_path, " is the certificate of '", cn, "', not of ", entity));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(key_path, " is not the key of ", cert_path));
  }
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  if (ca_key == nullptr || X509_verify(cert.get(), ca_key) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(cert_path, " is not signed by ", ca_path,
                     " (a certificate of another cluster? issue it again with"
                     " `bash tools/lib/pki.sh issue DIR ", entity, "` after removing it)"));
  }
  for (X509* c : {ca.get(), cert.get()}) {
    if (X509_cmp_current_time(X509_get0_notAfter(c)) < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(c == ca.get() ? ca_path : cert_path, " has expired"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ControlAuth ControlAuth::Insecure() { return ControlAuth(); }

absl::StatusOr<ControlAuth> ControlAuth::FromClusterDir(const std::string& cluster_dir,
                                                        const std::string& entity) {
  if (cluster_dir.empty()) return absl::InvalidArgumentError("empty cluster directory");
  if (entity.empty()) return absl::InvalidArgumentError("empty entity name");
  const std::string pki = PkiDir(cluster_dir);
  const std::string ca_path = pki + "/ca.crt";
  const std::string cert_path = absl::StrCat(pki, "/", entity, ".crt");
  const std::string key_path = absl::StrCat(pki, "/", entity, ".key");
  const std::string issue = absl::StrCat("bash tools/lib/pki.sh issue ", cluster_dir, " ",
                                         entity);

  absl::StatusOr<std::string> ca = ReadPkiFile(
      ca_path, "the cluster CA", absl::StrCat("bash tools/lib/pki.sh init ", cluster_dir));
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert =
      ReadPkiFile(cert_path, absl::StrCat("the certificate of ", entity), issue);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      ReadPkiFile(key_path, absl::StrCat("the key of ", entity), issue);
  if (!key.ok()) return key.status();
  absl::Status s = CheckFiles(entity, ca_path, *ca, cert_path, *cert, key_path, *key);
  if (!s.ok()) return s;

  ControlAuth auth;
  auth.secure_ = true;
  auth.entity_ = entity;
  auth.ca_path_ = ca_path;
  auth.ca_pem_ = std::move(*ca);
  auth.cert_pem_ = std::move(*cert);
  auth.key_pem_ = std::move(*key);
  return auth;
}

absl::StatusOr<ControlAuth> ControlAuth::FromFlags(const std::string& mode,
                                                   const std::string& cluster_dir,
                                                   const std::string& entity) {
  if (mode == "none") return Insecure();
  if (mode != "secret") {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth '", mode, "': want secret or none"));
  }
  if (cluster_dir.empty()) {
    return absl::InvalidArgumentError(
        "--auth secret needs --cluster-dir DIR (the certificates are under DIR/pki)");
  }
  return FromClusterDir(cluster_dir, entity);
}

std::string ControlAuth::Describe() const {
  if (!secure_) return "none";
  return absl::StrCat("mTLS as ", entity_, " (CA ", ca_path_, ")");
}

std::shared_ptr<grpc::ServerCredentials> ControlAuth::ServerCredentials() const {
  if (!secure_) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = ca_pem_;
  opts.pem_key_cert_pairs.push_back({key_pem_, cert_pem_});
  return grpc::SslServerCredentials(opts);
}

std::shared_ptr<grpc::ChannelCredentials> ControlAuth::ChannelCredentials() const {
  if (!secure_) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ca_pem_;
  opts.pem_private_key = key_pem_;
  opts.pem_cert_chain = cert_pem_;
  return grpc::SslCredentials(opts);
}

void ControlAuth::AddChannelArgs(grpc::ChannelArguments* args) const {
  if (secure_) args->SetSslTargetNameOverride(kMonTlsName);
}

}  // namespace msgr::mon
