#include "client/bench/bench_runner.h"
#include "client/bench/send_pool.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/bench/cpu_usage.h"
#include "client/bench/pattern.h"

namespace msgr::bench {
namespace {

constexpr size_t kMaxSamples = 5;

}  // namespace

std::string ObjectId(const std::string& prefix, uint64_t n) { return absl::StrCat(prefix, "_", n); }

ObjectOps OpsOf(client::Client& c) {
  ObjectOps ops;
  ops.write = [&c](std::string oid, RecordBufferRef data, client::WriteCallback cb) {
    c.AsyncWrite(std::move(oid), std::move(data), std::move(cb));
  };
  ops.alloc = [&c](size_t size) { return c.AllocBuffer(size); };
  ops.read = [&c](std::string oid, client::ReadCallback cb) {
    c.AsyncRead(std::move(oid), std::move(cb));
  };
  ops.poll = [&c] { return c.Poll(); };
  return ops;
}

absl::StatusOr<WriteRunResult> RunWrites(client::Client& c, const WriteRunOptions& o,
                                         std::ostream& out) {
  return RunWrites(OpsOf(c), o, out);
}

absl::StatusOr<WriteRunResult> RunWrites(const ObjectOps& ops, const WriteRunOptions& o,
                                         std::ostream& out) {
  FILE* acked_log = nullptr;
  if (!o.acked_log.empty()) {
    acked_log = std::fopen(o.acked_log.c_str(), "a");
    if (acked_log == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot open --acked-log ", o.acked_log, " for appending"));
    }
  }
  const bool reads = o.mode != RunMode::kWrite;
  if (reads && o.objects.empty()) {
    if (acked_log != nullptr) std::fclose(acked_log);
    return absl::InvalidArgumentError("no objects to read");
  }
  WriteRunResult r;
  // Everything below is touched only by the driver thread (hooks), so nothing is locked.
  std::string staged_oid;
  const ReadTarget* staged_read = nullptr;
  // The object op n reads: seq, the n-th; rand, one drawn from (seed, n), so prepare and
  // complete agree without remembering anything per op.
  auto read_of = [&o](uint64_t n) -> const ReadTarget& {
    if (o.mode == RunMode::kSeq) return o.objects[n];
    uint64_t z = o.seed + (n + 1) * 0x9e3779b97f4a7c15ull;  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return o.objects[(z ^ (z >> 31)) % o.objects.size()];
  };
  RecordBufferRef staged_data;
  // Object contents are made in buffers of ops.alloc (registered memory over rdma, sent
  // without a copy). With --max-objects each object's buffer is made once and reused
  // for its every write (the contents depend only on the object id), up to
  // kMaxCachedContents bytes in all; otherwise a new buffer per op (the messenger reuses
  // its memory) is filled with the op's object.
  constexpr uint64_t kMaxCachedContents = uint64_t{256} << 20;
  std::vector<RecordBufferRef> contents;
  if (!reads && o.max_objects > 0 && o.max_objects * o.object_size <= kMaxCachedContents) {
    contents.resize(o.max_objects);
  }
  uint64_t interval_count = 0, interval_sum_ns = 0, last_ops = 0;
  bool acked_pending = false;

  // With --max-objects the run overwrites a bounded set of objects (memory-mode OSDs keep
  // every object in RAM); the contents depend only on the object id, so verify still works.
  auto object_of = [&o](uint64_t n) { return o.max_objects > 0 ? n % o.max_objects : n; };
  DriverOptions dopt;
  dopt.concurrency = o.concurrency;
  dopt.count = o.count;
  if (o.mode == RunMode::kSeq) {
    dopt.count = o.count > 0 ? std::min<uint64_t>(o.count, o.objects.size()) : o.objects.size();
  }
  dopt.seconds = o.seconds;
  dopt.spin = o.spin;
  dopt.poll = ops.poll;
  DriverHooks hooks;
  hooks.prepare = [&](uint64_t n) {
    if (reads) {
      staged_read = &read_of(n);
      return;
    }
    const uint64_t k = object_of(n);
    staged_oid = ObjectId(o.prefix, k);
    if (!contents.empty() && contents[k]) {
      staged_data = contents[k];
      return;
    }
    staged_data = ops.alloc(o.object_size);
    FillPattern(staged_oid, staged_data->data(), o.object_size);
    if (!contents.empty()) contents[k] = staged_data;
  };
  std::unique_ptr<SendPool> pool;
  if (o.submit_threads > 0) pool = std::make_unique<SendPool>(o.submit_threads);
  hooks.start = [&](uint64_t n, const OpToken& t) {
    if (reads) {
      ops.read(staged_read->oid, [t, want = staged_read->size, oid = staged_read->oid](
                                     absl::StatusOr<std::string> got) {
        if (got.ok() && got->size() != want) {
          got = absl::DataLossError(absl::StrCat("read of ", oid, " returned ", got->size(),
                                                 " bytes, the listing said ", want));
        }
        t.Done(got.status());
      });
      return;
    }
    if (pool) {
      pool->Post([&ops, oid = std::move(staged_oid), data = std::move(staged_data), t]() mutable {
        ops.write(std::move(oid), std::move(data), [t](absl::Status s) { t.Done(std::move(s)); });
      });
      return;
    }
    ops.write(std::move(staged_oid), std::move(staged_data),
              [t](absl::Status s) { t.Done(std::move(s)); });
  };
  // A fenced client (PERMISSION_DENIED: blocklisted) can write nothing more: stop.
  bool fenced = false;
  hooks.give_up = [&] { return fenced; };
  hooks.complete = [&](Completion& c) {
    if (!c.status.ok()) {
      ++r.errors;
      fenced = fenced || absl::IsPermissionDenied(c.status);
      if (r.error_samples.size() < kMaxSamples) r.error_samples.push_back(c.status.ToString());
      return;
    }
    uint64_t ns = c.latency_ns();
    r.latency.Record(ns);
    ++interval_count;
    interval_sum_ns += ns;
    ++r.ops;
    if (reads) {
      r.bytes += read_of(c.n).size;
      return;
    }
    r.bytes += o.object_size;
    r.acked.push_back(object_of(c.n));
    if (acked_log != nullptr) {
      std::string line = absl::StrCat(ObjectId(o.prefix, object_of(c.n)), "\n");
      std::fwrite(line.data(), 1, line.size(), acked_log);
      acked_pending = true;
    }
  };
  hooks.after_batch = [&] {  // one flush per batch of acks, not per ack
    if (acked_pending) std::fflush(acked_log);
    acked_pending = false;
  };
  if (o.progress) {
    hooks.tick = [&](int sec) {
      double cur_us = interval_count ? interval_sum_ns / 1e3 / interval_count : 0;
      double mbs = (r.ops - last_ops) * static_cast<double>(o.object_size) / (1 << 20);
      out << absl::StrFormat("%5d %10d %9.2f %13.1f %13.1f\n", sec, r.ops, mbs, cur_us,
                             r.latency.mean() / 1e3)
          << std::flush;
      last_ops = r.ops;
      interval_count = 0;
      interval_sum_ns = 0;
    };
    out << "  sec        ops      MB/s   cur lat(us)   avg lat(us)\n" << std::flush;
  }
  const double cpu0 = SelfCpuSeconds();
  r.driver = RunDriver(dopt, hooks);
  pool.reset();  // RunDriver drained every op: the pool is idle
  r.client_cpu_s = SelfCpuSeconds() - cpu0;
  r.seconds = r.driver.seconds;
  if (acked_log != nullptr) std::fclose(acked_log);
  return r;
}

VerifyResult VerifyObjects(client::Client& c, uint64_t n,
                           const std::function<std::string(uint64_t)>& oid_of, int concurrency,
                           uint64_t object_size, std::chrono::nanoseconds spin,
                           uint64_t expect_size) {
  return VerifyObjects(OpsOf(c), n, oid_of, concurrency, object_size, spin, expect_size);
}

VerifyResult VerifyObjects(const ObjectOps& ops, uint64_t n,
                           const std::function<std::string(uint64_t)>& oid_of, int concurrency,
                           uint64_t object_size, std::chrono::nanoseconds spin,
                           uint64_t expect_size) {
  VerifyResult r;
  if (n == 0) return r;
  if (object_size > 0) {
    uint64_t cap = std::max<uint64_t>(1, kVerifyBytesInFlight / object_size);
    concurrency = static_cast<int>(std::min<uint64_t>(concurrency, cap));
  }
  auto fail = [&r](const absl::Status& s) {
    ++r.mismatches;
    if (r.samples.size() < kMaxSamples) r.samples.push_back(s.ToString());
  };
  DriverOptions dopt;
  dopt.concurrency = std::max(1, concurrency);
  dopt.count = n;
  dopt.spin = spin;
  dopt.poll = ops.poll;
  DriverHooks hooks;
  hooks.start = [&](uint64_t i, const OpToken& t) {
    ops.read(oid_of(i), [t](absl::StatusOr<std::string> d) {
      if (d.ok()) {
        t.Done(absl::OkStatus(), std::move(*d));
      } else {
        t.Done(d.status());
      }
    });
  };
  // The pattern check runs here on the driver thread, not in the (non-blocking) callback.
  hooks.complete = [&](Completion& c) {
    ++r.checked;
    if (!c.status.ok()) return fail(c.status);
    if (expect_size > 0 && c.data.size() != expect_size) {
      return fail(absl::DataLossError(absl::StrCat(oid_of(c.n), ": ", c.data.size(),
                                                   " bytes, expected ", expect_size)));
    }
    absl::Status s = VerifyPattern(oid_of(c.n), c.data);
    if (!s.ok()) fail(s);
    std::string().swap(c.data);  // free the object now, not when the batch is reused
  };
  RunDriver(dopt, hooks);
  return r;
}

absl::StatusOr<std::vector<std::string>> ReadOidFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --oids file ", path));
  std::vector<std::string> oids;
  std::string line;
  while (std::getline(in, line)) {
    auto t = absl::StripAsciiWhitespace(line);
    if (!t.empty()) oids.emplace_back(t);
  }
  return oids;
}

}  // namespace msgr::bench
