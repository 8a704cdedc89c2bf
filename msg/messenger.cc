// The backend registry behind Messenger::Create (backends register themselves by name,
// RegisterMessengerBackend) and EntityName's printing.
#include "msg/messenger.h"

#include <poll.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace msgr {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, MessengerFactory>& Registry() {
  static auto* r = new std::map<std::string, MessengerFactory>();
  return *r;
}

}  // namespace

namespace {

class HeapRecordBuffer final : public RecordBuffer {
 public:
  // Left uninitialized (not make_unique's zero fill): the caller fills it, and zeroing a
  // 4 MiB buffer first was 5% of a tcp bench's CPU at 4 MiB writes.
  explicit HeapRecordBuffer(size_t size)
      : HeapRecordBuffer(std::unique_ptr<char[]>(new char[std::max<size_t>(size, 1)]), size) {}

 private:
  HeapRecordBuffer(std::unique_ptr<char[]> mem, size_t size)
      : RecordBuffer(mem.get(), size), mem_(std::move(mem)) {}
  std::unique_ptr<char[]> mem_;
};

}  // namespace

absl::Status CheckFenced(const std::vector<FencedPeer>& fenced, const EntityName& peer,
                         uint64_t instance) {
  for (const FencedPeer& f : fenced) {
    if (!(f.name == peer) || (f.instance != 0 && f.instance != instance)) continue;
    return absl::PermissionDeniedError(
        absl::StrCat(peer.ToString(), " (instance ", absl::Hex(instance), ") is fenced: ",
                     f.why.empty() ? "blocklisted by the cluster" : f.why));
  }
  return absl::OkStatus();
}

RecordBufferRef MakeHeapRecordBuffer(size_t size) {
  return std::make_shared<HeapRecordBuffer>(size);
}

std::string EntityName::ToString() const {
  const char* t = type == EntityType::kOsd ? "osd" : type == EntityType::kMon ? "mon" : "client";
  return absl::StrCat(t, ".", id);
}

absl::StatusOr<EntityName> EntityName::Parse(std::string_view text) {
  EntityName n;
  size_t dot = text.find('.');
  const std::string_view type = text.substr(0, dot == std::string_view::npos ? 0 : dot);
  const std::string_view id = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (type == "client") {
    n.type = EntityType::kClient;
  } else if (type == "osd") {
    n.type = EntityType::kOsd;
  } else if (type == "mon") {
    n.type = EntityType::kMon;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(text), "' is not an entity name: client.N, osd.N or mon.N"));
  }
  if (id.empty() || id.find_first_not_of("0123456789") != std::string_view::npos ||
      !absl::SimpleAtoi(std::string(id), &n.id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(text), "' is not an entity name: the id after the dot is a number"));
  }
  return n;
}

void RegisterMessengerBackend(const std::string& name, MessengerFactory factory) {
  std::lock_guard<std::mutex> l(RegistryMutex());
  Registry()[name] = std::move(factory);
}

// ms_mode and its cipher, checked here once for every backend.
static absl::Status ValidateMsMode(const MessengerOptions& options) {
  if (options.ms_mode != "crc" && options.ms_mode != "secure") {
    return absl::InvalidArgumentError(
        absl::StrCat("ms_mode '", options.ms_mode, "' is unknown: use --ms-mode crc or secure"));
  }
  if (options.ms_secure_cipher != "aes-128-gcm" && options.ms_secure_cipher != "aes-256-gcm") {
    return absl::InvalidArgumentError(absl::StrCat("ms_secure_cipher '", options.ms_secure_cipher,
                                                   "' is unknown: use aes-128-gcm or aes-256-gcm"));
  }
  if (options.ms_mode != "secure") return absl::OkStatus();
  if (options.type != "tcp") {
    return absl::InvalidArgumentError(absl::StrCat(
        "secure mode is tcp-only: one-sided RDMA writes bypass the CPU that would decrypt them "
        "(ms_type '", options.type, "'); use --ms-mode crc with rdma, or --ms-type tcp"));
  }
  if (options.auth.mode != AuthConfig::Mode::kSecret) {
    return absl::InvalidArgumentError(
        "secure mode needs a cluster key (auth secret): its session keys are derived from it "
        "in the handshake; use --auth secret or --ms-mode crc");
  }
  return absl::OkStatus();
}

// The auth settings, checked here once for every backend.
static absl::Status ValidateAuth(const AuthConfig& auth) {
  if (auth.mode == AuthConfig::Mode::kSecret && auth.secret.empty()) {
    return absl::InvalidArgumentError(
        "auth mode is secret but the cluster key is empty: load a keyring "
        "(AuthConfig::FromKeyringFile) or use AuthConfig::None()");
  }
  if (auth.entity != nullptr && auth.mode != AuthConfig::Mode::kSecret) {
    return absl::InvalidArgumentError(
        "an entity certificate needs the cluster key too (auth secret): use --auth secret");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Messenger>> Messenger::Create(const MessengerOptions& options,
                                                             Dispatcher* dispatcher) {
  if (absl::Status s = ValidateMsMode(options); !s.ok()) return s;
  MessengerFactory f;
  {
    std::lock_guard<std::mutex> l(RegistryMutex());
    auto it = Registry().find(options.type);
    if (it == Registry().end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown messenger type '", options.type,
                                                     "': use --ms-type=tcp or --ms-type=rdma"));
    }
    f = it->second;
  }
  // After the lookup: an unknown backend is the first thing to fix.
  if (absl::Status s = ValidateAuth(options.auth); !s.ok()) return s;
  MessengerOptions o = options;
  std::random_device random;
  while (o.instance == 0) o.instance = (uint64_t{random()} << 32) | random();
  return f(o, dispatcher);
}

void Messenger::WaitFor(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN, 0};
  (void)poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
}

}  // namespace msgr
