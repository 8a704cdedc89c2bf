#include "osd_sim/mon/control_auth.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "msg/entity_credentials.h"

namespace msgr::mon {

ControlAuth ControlAuth::Insecure() { return ControlAuth(); }

absl::StatusOr<ControlAuth> ControlAuth::FromClusterDir(const std::string& cluster_dir,
                                                        const std::string& entity) {
  // The same files and checks as the messenger's entity proof: loaded in one place.
  auto creds = EntityCredentials::FromClusterDir(cluster_dir, entity);
  if (!creds.ok()) return creds.status();
  ControlAuth auth;
  auth.secure_ = true;
  auth.entity_ = entity;
  auth.ca_path_ = cluster_dir + "/pki/ca.crt";
  auth.ca_pem_ = (*creds)->ca_pem();
  auth.cert_pem_ = (*creds)->cert_pem();
  auth.key_pem_ = (*creds)->key_pem();
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
