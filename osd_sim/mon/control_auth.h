// ControlAuth: how one end of the monitor's gRPC control plane authenticates, either not at
// all (`--auth none`, today's loopback experiments) or by mutual TLS with the cluster's PKI
// (`--auth secret`): every entity holds a certificate signed by the cluster CA whose CN is
// its name (mon, osd.K, client.admin, client.NAME), made by tools/lib/pki.sh:
//
//   DIR/pki/ca.crt            the cluster CA (every end trusts only it)
//   DIR/pki/ENTITY.crt/.key   the entity's certificate and key (key mode 0600)
//
// The monitor's certificate carries the fixed DNS name kMonTlsName ("mon.msgr"); clients
// verify the monitor under that name (gRPC's SSL target name override) whatever address
// they dial, so a monitor moved to another host or port keeps its certificate.
//
// Only gRPC's own TLS credentials are used (grpc::SslServerCredentials / SslCredentials);
// the files are loaded and checked by msg/entity_credentials.h (the messenger's entity
// proof uses the same ones), so that a wrong file gives a message naming it instead of a
// failed handshake later.
//
// Thread-safety: a ControlAuth is an immutable value after construction; copy it freely
// and use it from any thread.
#ifndef MSGR_OSD_SIM_MON_CONTROL_AUTH_H_
#define MSGR_OSD_SIM_MON_CONTROL_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace msgr::mon {

// The name clients verify the monitor's certificate under.
inline constexpr char kMonTlsName[] = "mon.msgr";
// Default entities of the mon daemon and of monctl.
inline constexpr char kMonEntity[] = "mon";
inline constexpr char kAdminEntity[] = "client.admin";

class ControlAuth {
 public:
  // No authentication and no encryption: every caller may do everything.
  static ControlAuth Insecure();

  // Loads DIR/pki/ca.crt, DIR/pki/ENTITY.crt and DIR/pki/ENTITY.key and checks them: the
  // certificate's CN is `entity`, it is signed by ca.crt and not expired, the key is its
  // key. NOT_FOUND naming the missing file and how to make it; FAILED_PRECONDITION for a
  // file that is there but wrong (names the file and what is wrong).
  static absl::StatusOr<ControlAuth> FromClusterDir(const std::string& cluster_dir,
                                                    const std::string& entity);

  // What the `--auth MODE --cluster-dir DIR [--entity NAME]` flags of every daemon and
  // tool mean: "none" -> Insecure(); "secret" -> FromClusterDir(cluster_dir, entity)
  // (INVALID_ARGUMENT if cluster_dir is empty); anything else INVALID_ARGUMENT.
  static absl::StatusOr<ControlAuth> FromFlags(const std::string& mode,
                                               const std::string& cluster_dir,
                                               const std::string& entity);

  bool secure() const { return secure_; }
  // The entity this end authenticates as; empty when insecure.
  const std::string& entity() const { return entity_; }
  // DIR/pki/ca.crt; empty when insecure. Error messages point at it.
  const std::string& ca_path() const { return ca_path_; }
  // For logs: "none" or "mTLS as ENTITY (CA DIR/pki/ca.crt)".
  std::string Describe() const;

  // Server side: TLS with this entity's certificate, requiring a client certificate that
  // chains to the CA (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY).
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  // Client side: TLS trusting only the CA, presenting this entity's certificate. Use
  // with AddChannelArgs, which sets the name the monitor is verified under.
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // Adds the SSL target name override (kMonTlsName) when secure; nothing otherwise.
  void AddChannelArgs(grpc::ChannelArguments* args) const;

 private:
  ControlAuth() = default;

  bool secure_ = false;
  std::string entity_;
  std::string ca_path_;
  std::string ca_pem_;
  std::string cert_pem_;
  std::string key_pem_;
};

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_CONTROL_AUTH_H_
