#include "osd_sim/osd_protocol.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace msgr::osd {
namespace {

constexpr size_t kMaxErrorBytes = 4096;

class Writer {
 public:
  void U16(uint16_t v) { Raw(&v, sizeof v); }
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void U64(uint64_t v) { Raw(&v, sizeof v); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  bool U16(uint16_t* v) { return Raw(v, sizeof *v); }
  bool U32(uint32_t* v) { return Raw(v, sizeof *v); }
  bool U64(uint64_t* v) { return Raw(v, sizeof *v); }
  bool Str(std::string* s, size_t max) {
    uint32_t n;
    if (!U32(&n) || n > max || in_.size() - pos_ < n) return false;
    s->assign(in_, pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  bool Raw(void* p, size_t n) {
    if (in_.size() - pos_ < n) return false;
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  const std::string& in_;
  size_t pos_ = 0;
};

absl::Status Malformed(const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", what, " message"));
}

bool ValidCode(uint32_t c) { return c <= static_cast<uint32_t>(absl::StatusCode::kUnauthenticated); }

}  // namespace

Message Encode(const WriteAck& m) {
  Writer w;
  w.U64(m.map_epoch);
  w.U32(static_cast<uint32_t>(m.entries.size()));
  for (const auto& e : m.entries) {
    w.U64(e.tid);
    w.U32(static_cast<uint32_t>(e.code));
    w.Str(e.error.substr(0, kMaxErrorBytes));
  }
  return Message{kWriteAck, w.Take()};
}

Message Encode(const ReadRequest& m) {
  Writer w;
  w.U64(m.tid);
  w.Str(m.oid);
  return Message{kRead, w.Take()};
}

Message Encode(const ReadReply& m) {
  Writer w;
  w.U64(m.tid);
  w.U32(static_cast<uint32_t>(m.code));
  w.Str(m.error.substr(0, kMaxErrorBytes));
  w.Str(m.data);
  return Message{kReadReply, w.Take()};
}

absl::StatusOr<WriteAck> DecodeWriteAck(const Message& m) {
  if (m.type != kWriteAck) return Malformed("write-ack");
  Reader r(m.payload);
  WriteAck a;
  uint32_t n;
  if (!r.U64(&a.map_epoch) || !r.U32(&n) || n > m.payload.size() / 16) {
    return Malformed("write-ack");
  }
  a.entries.resize(n);
  for (auto& e : a.entries) {
    uint32_t code;
    if (!r.U64(&e.tid) || !r.U32(&code) || !ValidCode(code) || !r.Str(&e.error, kMaxErrorBytes)) {
      return Malformed("write-ack");
    }
    e.code = static_cast<absl::StatusCode>(code);
  }
  if (!r.done()) return Malformed("write-ack");
  return a;
}

absl::StatusOr<ReadRequest> DecodeReadRequest(const Message& m) {
  if (m.type != kRead) return Malformed("read");
  Reader r(m.payload);
  ReadRequest q;
  if (!r.U64(&q.tid) || !r.Str(&q.oid, kMaxOidBytes) || q.oid.empty() || !r.done()) {
    return Malformed("read");
  }
  return q;
}

absl::StatusOr<ReadReply> DecodeReadReply(const Message& m) {
  if (m.type != kReadReply) return Malformed("read-reply");
  Reader r(m.payload);
  ReadReply p;
  uint32_t code;
  if (!r.U64(&p.tid) || !r.U32(&code) || !ValidCode(code) || !r.Str(&p.error, kMaxErrorBytes) ||
      !r.Str(&p.data, m.payload.size()) || !r.done()) {
    return Malformed("read-reply");
  }
  p.code = static_cast<absl::StatusCode>(code);
  return p;
}

}  // namespace msgr::osd
