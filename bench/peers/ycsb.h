// ycsb.h: YCSB core workloads A-F for the C++ peers (`--ycsb=a..f --record_size=N`), a
// line-for-line port of crates/wisckey-cli/src/bench/ycsb.rs and ycsb_gen.rs (definitions in
// docs/BENCHMARKS.md, "YCSB core workloads"). For the same --seed, --num, --reads and one
// thread, every engine sees the same operation and key sequence, so per-op counts and found
// counts must agree exactly (bench/run-ycsb.sh CHECK=1 compares them).
// Floating point: only +, -, *, / and std::pow (glibc's, the same libm Rust's powf calls);
// -O2 on x86-64 does not contract a*b+c into FMA, so results are bit-identical to Rust's.
// Thread-safety: workers share the Engine (thread-safe) and the atomic insert counter; each
// owns its generators, value pool and latencies, built before the run phase's clock starts.
#pragma once

#include <cmath>
#include <memory>
#include <optional>

#include "bench_common.h"

namespace wbench {
namespace ycsb {

constexpr uint64_t kMaxScan = 100;
constexpr int kOps = 5;  // read, update, insert, scan, rmw
static const char* const kOpNames[kOps] = {"read", "update", "insert", "scan", "rmw"};
// The generators (NextDouble, FnvHash64, Zeta, Zipfian, ScrambledZipfian) are in
// bench_common.h, which overwrite --distribution=zipfian shares.

struct Workload {
  char name = 'a';
  double mix[kOps] = {0, 0, 0, 0, 0};
  bool latest = false;  // request distribution: latest (D) or scrambled zipfian

  static bool Parse(const std::string& s, Workload* w) {
    static const struct { char n; double mix[kOps]; bool latest; } table[] = {
        {'a', {0.5, 0.5, 0, 0, 0}, false},    {'b', {0.95, 0.05, 0, 0, 0}, false},
        {'c', {1.0, 0, 0, 0, 0}, false},      {'d', {0.95, 0, 0.05, 0, 0}, true},
        {'e', {0, 0, 0.05, 0.95, 0}, false},  {'f', {0.5, 0, 0, 0, 0.5}, false}};
    if (s.size() != 1) return false;
    char c = static_cast<char>(tolower(static_cast<unsigned char>(s[0])));
    for (const auto& row : table) {
      if (row.n != c) continue;
      w->name = c;
      for (int i = 0; i < kOps; i++) w->mix[i] = row.mix[i];
      w->latest = row.latest;
      return true;
    }
    return false;
  }

  // Cumulative proportions in the order read, update, insert, scan, rmw.
  int PickOp(double u) const {
    double acc = 0;
    for (int i = 0; i < kOps; i++) {
      acc += mix[i];
      if (u < acc) return i;
    }
    for (int i = kOps - 1; i >= 0; i--)
      if (mix[i] > 0) return i;
    return 0;
  }
};

inline void RecordKey(uint64_t record, size_t key_size, std::string* out) {
  size_t digits = key_size < 19 ? key_size : 19;
  uint64_t modulus = 1;
  for (size_t i = 0; i < digits; i++) modulus *= 10;
  FormatKey(FnvHash64(record) % modulus, key_size, out);
}

struct PhaseResult {
  uint64_t ops = 0, user_written = 0, user_read = 0;
  uint64_t found[kOps] = {0, 0, 0, 0, 0};  // read/rmw: keys found; scan: entries returned
  double wall = 0;
  Latencies lat[kOps];
};

// Built before the run phase's clock starts (Run below); `latest` is the workload's latest
// generator (D only, nullptr otherwise), copied.
class RunWorker {
 public:
  RunWorker(Engine* e, const Flags& f, const Workload& w, uint64_t thread, uint64_t zipf_items,
            const Zipfian* latest, std::atomic<uint64_t>* inserted)
      : e_(e),
        f_(f),
        w_(w),
        rng_(KeyStream(f.seed, std::string("ycsb-") + w.name, thread)),
        scrambled_(zipf_items),
        inserted_(inserted),
        values_(f.record_size) {
    if (latest) latest_ = *latest;
  }

  PhaseResult Run() {
    uint64_t record_bytes = f_.key_size + f_.record_size;
    for (int64_t i = 0; i < f_.reads; i++) {
      int op = w_.PickOp(NextDouble(&rng_));
      uint64_t record = op == 2 ? inserted_->fetch_add(1, std::memory_order_relaxed)
                                : ChooseRecord();
      RecordKey(record, f_.key_size, &key_);
      auto start = std::chrono::steady_clock::now();
      switch (op) {
        case 0:
          if (Read()) r_.found[0]++;
          break;
        case 1:
        case 2:
          e_->Put(key_, values_.Next(), f_.record_size, false);
          r_.user_written += record_bytes;
          break;
        case 3:
          r_.found[3] += Scan();
          break;
        default:
          if (Read()) r_.found[4]++;
          e_->Put(key_, values_.Next(), f_.record_size, false);
          r_.user_written += record_bytes;
      }
      r_.lat[op].Record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count());
      r_.ops++;
    }
    return std::move(r_);
  }

 private:
  uint64_t ChooseRecord() {
    uint64_t inserted = inserted_->load(std::memory_order_relaxed);
    if (inserted == 0) inserted = 1;
    if (w_.latest) {
      uint64_t last = inserted - 1;
      uint64_t back = latest_->NextOf(&rng_, last + 1);
      return last - (back < last ? back : last);
    }
    for (;;) {
      uint64_t record = scrambled_.Next(&rng_);
      if (record < inserted) return record;
    }
  }
  bool Read() {
    int64_t len = e_->Get(key_);
    if (len < 0) return false;
    r_.user_read += key_.size() + static_cast<uint64_t>(len);
    return true;
  }
  uint64_t Scan() {
    uint64_t len = 1 + rng_.Next() % kMaxScan, entries = 0;
    std::unique_ptr<Cursor> c = e_->NewCursor();
    c->Seek(key_);
    for (uint64_t i = 0; i < len && c->Valid(); i++) {
      r_.user_read += c->KeySize() + c->CopyValue(&value_);
      entries++;
      c->Next();
    }
    CheckCursor(c.get(), "scan");
    return entries;
  }

  Engine* e_;
  const Flags& f_;
  const Workload& w_;
  SplitMix64 rng_;
  ScrambledZipfian scrambled_;
  std::optional<Zipfian> latest_;  // set for D
  std::atomic<uint64_t>* inserted_;
  ValuePool values_;
  std::string key_, value_;
  PhaseResult r_;
};

inline PhaseResult Load(Engine* e, const Flags& f) {
  PhaseResult total;
  uint64_t per_thread = (f.num + f.threads - 1) / f.threads;
  std::vector<PhaseResult> parts(f.threads);
  std::vector<std::thread> workers;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t t = 0; t < f.threads; t++) {
    workers.emplace_back([&, t] {
      ValuePool values(f.record_size);
      std::string key;
      uint64_t end = std::min((t + 1) * per_thread, f.num);
      for (uint64_t record = t * per_thread; record < end; record++) {
        RecordKey(record, f.key_size, &key);
        auto op = std::chrono::steady_clock::now();
        e->Put(key, values.Next(), f.record_size, false);
        parts[t].lat[2].Record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - op)
                                   .count());
        parts[t].ops++;
      }
    });
  }
  for (auto& w : workers) w.join();
  total.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& p : parts) {
    total.ops += p.ops;
    total.lat[2].Merge(p.lat[2]);
  }
  total.user_written = total.ops * (f.key_size + f.record_size);
  return total;
}

inline PhaseResult Run(Engine* e, const Flags& f, const Workload& w) {
  std::atomic<uint64_t> inserted{f.num};
  double expected_inserts = static_cast<double>(static_cast<uint64_t>(f.reads) * f.threads) *
                            w.mix[2];
  uint64_t zipf_items = f.num + static_cast<uint64_t>(2.0 * expected_inserts);
  std::vector<PhaseResult> parts(f.threads);
  // Everything the workers need, before the clock starts: latest's zipfian (an O(num) zeta
  // sum; D only) built once and copied to each worker, the op streams and value pools.
  std::optional<Zipfian> latest;
  if (w.latest) latest.emplace(f.num ? f.num : 1);
  std::vector<std::unique_ptr<RunWorker>> run_workers;
  for (uint64_t t = 0; t < f.threads; t++) {
    run_workers.push_back(std::make_unique<RunWorker>(
        e, f, w, t, zipf_items, latest ? &*latest : nullptr, &inserted));
  }
  std::vector<std::thread> workers;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t t = 0; t < f.threads; t++) {
    workers.emplace_back([&, t] { parts[t] = run_workers[t]->Run(); });
  }
  for (auto& th : workers) th.join();
  PhaseResult total;
  total.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& p : parts) {
    total.ops += p.ops;
    total.user_written += p.user_written;
    total.user_read += p.user_read;
    for (int i = 0; i < kOps; i++) {
      total.found[i] += p.found[i];
      total.lat[i].Merge(p.lat[i]);
    }
  }
  return total;
}

// `  read   : count N  found F  p50 X  p99 Y  p99.9 Z  (us)`, as ycsb.rs's op_lines.
inline void PrintOpLines(PhaseResult* r, bool load) {
  for (int i = 0; i < kOps; i++) {
    Latencies& lat = r->lat[i];
    if (lat.Count() == 0 || (load && i != 2)) continue;
    std::string found;
    if (!load && (i == 0 || i == 3 || i == 4)) found = "  found " + std::to_string(r->found[i]);
    printf("  %-6s : count %" PRIu64 "%s  p50 %.2f  p99 %.2f  p99.9 %.2f  (us)\n", kOpNames[i],
           lat.Count(), found.c_str(), lat.PercentileMicros(50000),
           lat.PercentileMicros(99000), lat.PercentileMicros(99900));
  }
}

// Load (unless --use_existing_db), then the run phase (unless --ycsb_load_only), each with its
// amplification/CPU lines and per-operation latencies; the same lines as `wisckey-bench bench
// --ycsb`.
inline int RunYcsb(Engine* e, const Flags& f) {
  Workload w;
  if (!Workload::Parse(f.ycsb, &w)) {
    fprintf(stderr, "unknown YCSB workload '%s' (a..f)\n", f.ycsb.c_str());
    return 2;
  }
  printf("engine:     %s\n", e->Describe().c_str());
  printf("keys:       %zu bytes each\nvalues:     %zu bytes each (incompressible)\n",
         f.key_size, f.record_size);
  printf("entries:    %" PRIu64 "\nthreads:    %" PRIu64 "\ndb:         %s\n", f.num,
         f.threads, f.db.c_str());
  printf("------------------------------------------------\n");
  printf("ycsb:       workload %c record_size=%zu\n", w.name, f.record_size);
  fflush(stdout);
  if (!f.use_existing_db) e->Destroy();
  Device dev;
  const Device* devp = DeviceOf(f.db, &dev) ? &dev : nullptr;
  e->Open();
  for (int phase = 0; phase < 2; phase++) {
    bool load = phase == 0;
    std::string name = std::string("ycsb-") + w.name + (load ? "-load" : "-run");
    if (load && f.use_existing_db) {
      printf("%s : skipped (--use_existing_db is true)\n", name.c_str());
      continue;
    }
    if (!load && f.ycsb_load_only) {
      printf("%s : skipped (--ycsb_load_only is true)\n", name.c_str());
      continue;
    }
    ::sync();
    IoSample before = Sample(devp);
    double cpu_before = CpuSeconds();
    PhaseResult r = load ? Load(e, f) : Run(e, f, w);
    double cpu_after = CpuSeconds();
    double wall = r.wall > 1e-9 ? r.wall : 1e-9;
    uint64_t ops = r.ops ? r.ops : 1;
    printf("%-12s : %11.3f micros/op %.0f ops/sec\n", name.c_str(),
           wall * 1e6 * static_cast<double>(f.threads) / static_cast<double>(ops),
           static_cast<double>(r.ops) / wall);
    ::sync();
    IoSample after = Sample(devp);
    SpanFacts facts;
    facts.user_written = r.user_written;
    facts.user_read = r.user_read;
    facts.has_live = !f.use_existing_db;
    facts.live_bytes = f.num * (f.key_size + f.record_size);
    if (cpu_before >= 0 && cpu_after >= 0) {
      facts.cpu = cpu_after - cpu_before;
      facts.wall = r.wall;
    }
    PrintAmpLines(devp, before, after, facts, f.db);
    PrintOpLines(&r, load);
    fflush(stdout);
  }
  e->Close();
  return 0;
}

}  // namespace ycsb
}  // namespace wbench
