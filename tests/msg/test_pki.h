// A throwaway cluster PKI for tests, made in memory with OpenSSL (the same shape as
// tools/lib/pki.sh: an EC P-256 CA, entity certificates whose CN is the entity name).
#ifndef MSGR_TESTS_MSG_TEST_PKI_H_
#define MSGR_TESTS_MSG_TEST_PKI_H_

#include <memory>
#include <string>
#include <vector>

#include "msg/entity_credentials.h"
#include "msg/messenger.h"

namespace msgr::testing {

struct PemPair {
  std::string cert_pem;
  std::string key_pem;
};

class TestPki {
 public:
  TestPki();  // a fresh CA
  const std::string& ca_pem() const { return ca_.cert_pem; }
  // A certificate with CN `entity` signed by this CA (`days_valid` < 0: already expired).
  PemPair Issue(const std::string& entity, int days_valid = 30) const;
  // EntityCredentials for `entity` under this CA. ASSERTs (aborts the test) on failure.
  std::shared_ptr<const EntityCredentials> Credentials(const std::string& entity) const;
  // AuthConfig with the cluster key `secret` and `entity`'s credentials.
  AuthConfig Auth(const std::string& secret, const std::string& entity) const;
  // Writes DIR/pki/ca.crt and DIR/pki/ENTITY.crt/.key for each entity, as pki.sh would.
  void WriteClusterDir(const std::string& dir, const std::vector<std::string>& entities) const;

 private:
  PemPair ca_;
};

}  // namespace msgr::testing

#endif  // MSGR_TESTS_MSG_TEST_PKI_H_
