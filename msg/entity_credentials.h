// EntityCredentials: who this end is, proven with the cluster's PKI (msg/PROTOCOL.md,
// "Entity proof"). Every entity holds a certificate signed by the cluster CA whose CN is
// its name (mon, osd.K, client.admin, client.NAME), made by tools/lib/pki.sh:
//
//   DIR/pki/ca.crt            the cluster CA (every end trusts only it)
//   DIR/pki/ENTITY.crt/.key   the entity's certificate and key (key mode 0600)
//
// The messenger handshake uses it so that a peer proves its entity, not only that it holds
// the cluster key: each side signs the handshake's nonces and names with its key and sends
// its certificate; the other side checks the certificate chains to the CA and names the
// entity the peer claims (an OSD only as itself; any client certificate for a client). The
// monitor's mutual TLS loads the same files (osd_sim/mon/control_auth.h).
//
// Thread-safety: immutable after FromPem / FromClusterDir; share it (shared_ptr<const>)
// and call it from any thread.
#ifndef MSGR_MSG_ENTITY_CREDENTIALS_H_
#define MSGR_MSG_ENTITY_CREDENTIALS_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

struct evp_pkey_st;
struct x509_st;
struct x509_store_st;

namespace msgr {

struct EntityName;

class EntityCredentials {
 public:
  // Parses and checks PEM text: the certificate's CN is `expect_entity` (unless empty), the
  // key is its key, it is signed by the CA, and neither has expired. FAILED_PRECONDITION
  // naming `*_what` (a path, for messages) otherwise.
  static absl::StatusOr<std::shared_ptr<const EntityCredentials>> FromPem(
      std::string ca_pem, std::string cert_pem, std::string key_pem,
      const std::string& ca_what = "the CA",
      const std::string& cert_what = "the certificate", const std::string& key_what = "the key",
      const std::string& expect_entity = "");

  // Loads DIR/pki/ca.crt, DIR/pki/ENTITY.crt and DIR/pki/ENTITY.key; the certificate's CN
  // must be `entity`. NOT_FOUND naming a missing file and the command that makes it;
  // FAILED_PRECONDITION for a file that is there but wrong.
  static absl::StatusOr<std::shared_ptr<const EntityCredentials>> FromClusterDir(
      const std::string& cluster_dir, const std::string& entity);

  // True when DIR/pki/ca.crt exists: the cluster was made with a PKI (tools/cluster.sh).
  static bool ClusterDirHasPki(const std::string& cluster_dir);

  ~EntityCredentials();
  EntityCredentials(const EntityCredentials&) = delete;
  EntityCredentials& operator=(const EntityCredentials&) = delete;

  // The certificate's CN ("osd.3", "client.admin").
  const std::string& entity() const { return entity_; }
  const std::string& ca_pem() const { return ca_pem_; }
  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }
  // The certificate as DER, as it crosses the wire.
  const std::string& cert_der() const { return cert_der_; }

  // Signs `data` with the entity's key (SHA-256; ECDSA for the keys pki.sh makes).
  absl::StatusOr<std::string> Sign(std::string_view data) const;

  // Checks a peer's proof: `cert_der` chains to our CA and is valid now, its CN may act as
  // `claimed` (CertNameAllows), and `sig` is its key's signature of `data`. Returns the
  // certificate's CN. UNAUTHENTICATED with the reason otherwise.
  absl::StatusOr<std::string> VerifyPeer(std::string_view cert_der, const EntityName& claimed,
                                         std::string_view data, std::string_view sig) const;

 private:
  EntityCredentials() = default;

  std::string entity_;
  std::string ca_pem_, cert_pem_, key_pem_, cert_der_;
  x509_store_st* store_ = nullptr;  // holds the CA
  evp_pkey_st* key_ = nullptr;
};

// The roles of the messenger: a certificate named "osd.K" (or "mon...") may act only as
// that entity; any "client.*" certificate may act as any client (client instances take
// numeric ids at run time, certificates are per user: client.admin, client.bench).
bool CertNameAllows(std::string_view cert_name, const EntityName& claimed);

}  // namespace msgr

#endif  // MSGR_MSG_ENTITY_CREDENTIALS_H_
