// The backend registry behind Messenger::Create (backends register themselves by name,
// RegisterMessengerBackend) and EntityName's printing.
#include "msg/messenger.h"

#include <mutex>

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

std::string EntityName::ToString() const {
  const char* t = type == EntityType::kOsd ? "osd" : type == EntityType::kMon ? "mon" : "client";
  return absl::StrCat(t, ".", id);
}

void RegisterMessengerBackend(const std::string& name, MessengerFactory factory) {
  std::lock_guard<std::mutex> l(RegistryMutex());
  Registry()[name] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<Messenger>> Messenger::Create(const MessengerOptions& options,
                                                             Dispatcher* dispatcher) {
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
  return f(options, dispatcher);
}

}  // namespace msgr
