// A messenger's sessions, and the one set of rules of both backends for them
// (msg/PROTOCOL.md, "Sessions, lossless resume, exactly-once").
//
// Connecting side: one session per peer address; Connect to an address returns the
// session to it unless that one is over (then a new one takes its place).
//
// Accepting side, what a peer that authenticated gets:
//   * a lossless session is found by the cookie the peer sent in AUTH. It is resumed if the
//     peer says it had a session (AUTH flag had_session) and it is not over; it must be
//     resumed under the name that opened it (else PERMISSION_DENIED: the cookie crosses the
//     wire in the clear, so this stops a mix-up, not an attacker with the key). Found but
//     the peer says it never had one (its first handshake was cut after ours ended): the
//     half-made session is replaced by a new one;
//   * otherwise the peer gets a new session, which replaces that peer's lossless sessions
//     that have no link (the peer restarted and came back with a new cookie). Sessions of
//     the same name that are connected are left alone: they end by their own faults;
//   * lossy sessions are never resumed; they are kept only to be listed (shutdown,
//     fencing, DumpSessions) until they end.
//
// Sans-I/O and not thread-safe: the messenger holds its lock around every call, and does
// what a decision says (resets the replaced sessions, attaches the link) after releasing
// it. C is the backend's connection: peer_name(), cookie(), lossless(), is_connected(),
// closed(). A session leaves the table when it ends for good (Erase).
#ifndef MSGR_MSG_SESSION_SESSION_TABLE_H_
#define MSGR_MSG_SESSION_SESSION_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "msg/messenger.h"

namespace msgr::session {

// What an authenticated peer asked for (from its HELLO and AUTH, and the policy).
struct SessionRequest {
  EntityName peer;
  uint64_t cookie = 0;
  bool lossless = false;     // the policy for the peer's type
  bool had_session = false;  // AUTH flag: the peer was connected in this session before
};

template <typename C>
class SessionTable {
 public:
  struct Admission {
    // The session to continue, or null: the caller makes a new one and Insert()s it.
    std::shared_ptr<C> resume;
    // Sessions the new one ends (the caller resets each, outside its lock).
    std::vector<std::shared_ptr<C>> replaced;
  };

  absl::StatusOr<Admission> Admit(const SessionRequest& r) const {
    Admission a;
    if (r.lossless) {
      auto it = lossless_.find(r.cookie);
      if (it != lossless_.end() && !it->second->closed()) {
        const std::shared_ptr<C>& s = it->second;
        if (!(s->peer_name() == r.peer)) {
          return absl::PermissionDeniedError(absl::StrCat("session cookie belongs to ",
                                                          s->peer_name().ToString(), ", not to ",
                                                          r.peer.ToString()));
        }
        if (r.had_session) {
          a.resume = s;
          return a;
        }
        a.replaced.push_back(s);  // half made: the peer never saw it open
      }
    }
    for (const auto& [cookie, s] : lossless_) {
      if (cookie != r.cookie && s->peer_name() == r.peer && !s->is_connected()) {
        a.replaced.push_back(s);
      }
    }
    return a;
  }

  // Connecting side: the session to `addr` that is not over, or null.
  std::shared_ptr<C> Outgoing(const std::string& addr) const {
    auto it = outgoing_.find(addr);
    if (it == outgoing_.end() || it->second->closed()) return nullptr;
    return it->second;
  }
  // A new session to `addr` (after Outgoing found none): takes the place of an ended one.
  void InsertOutgoing(const std::string& addr, std::shared_ptr<C> c) {
    outgoing_[addr] = std::move(c);
  }
  // The connecting side's sessions (ended ones not yet erased included).
  std::vector<std::shared_ptr<C>> AllOutgoing() const {
    std::vector<std::shared_ptr<C>> all;
    all.reserve(outgoing_.size());
    for (const auto& [addr, s] : outgoing_) all.push_back(s);
    return all;
  }

  // Accepting side: a new session (after Admit said so): takes its cookie's place if it is
  // lossless.
  void Insert(std::shared_ptr<C> c) {
    if (c->lossless()) {
      lossless_[c->cookie()] = std::move(c);
    } else {
      const C* key = c.get();
      lossy_[key] = std::move(c);
    }
  }

  // `c` ended for good (a session that took its place, under its cookie or address,
  // stays). Returns true if it was there.
  bool Erase(const C* c) {
    size_t n = lossy_.erase(c);
    auto it = lossless_.find(c->cookie());
    if (it != lossless_.end() && it->second.get() == c) {
      lossless_.erase(it);
      ++n;
    }
    for (auto o = outgoing_.begin(); o != outgoing_.end(); ++o) {
      if (o->second.get() == c) {
        outgoing_.erase(o);
        ++n;
        break;
      }
    }
    return n != 0;
  }

  // The accepting side's sessions.
  std::vector<std::shared_ptr<C>> Accepted() const {
    std::vector<std::shared_ptr<C>> all;
    all.reserve(lossless_.size() + lossy_.size());
    for (const auto& [cookie, s] : lossless_) all.push_back(s);
    for (const auto& [ptr, s] : lossy_) all.push_back(s);
    return all;
  }
  // Both sides' (DumpSessions, shutdown).
  std::vector<std::shared_ptr<C>> All() const {
    std::vector<std::shared_ptr<C>> all = AllOutgoing();
    for (auto& s : Accepted()) all.push_back(std::move(s));
    return all;
  }
  size_t size() const { return outgoing_.size() + lossless_.size() + lossy_.size(); }
  void Clear() {
    outgoing_.clear();
    lossless_.clear();
    lossy_.clear();
  }

 private:
  std::map<std::string, std::shared_ptr<C>> outgoing_;  // by peer address
  std::map<uint64_t, std::shared_ptr<C>> lossless_;     // by cookie
  std::map<const C*, std::shared_ptr<C>> lossy_;
};

// DumpSessions: what each of `sessions` says of itself. Each is asked under its own lock,
// so the caller copies the table under the messenger's lock and calls this after.
template <typename C>
std::vector<SessionInfo> InfoOf(const std::vector<std::shared_ptr<C>>& sessions) {
  std::vector<SessionInfo> out;
  out.reserve(sessions.size());
  for (const auto& s : sessions) out.push_back(s->Info());
  return out;
}

}  // namespace msgr::session

#endif  // MSGR_MSG_SESSION_SESSION_TABLE_H_
