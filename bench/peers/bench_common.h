// bench_common.h: the workload, flags, benchmark bodies and report lines shared by the C++
// peer programs (LevelDB, RocksDB); measurement is in bench_io.h. It mirrors
// crates/wisckey-cli/src/bench/ bit for bit: same splitmix64 key streams
// (seed ^ fnv1a64(name) ^ (thread+1)*GOLDEN, index = next() % num), zero-padded decimal keys
// (readmissing: plus a '.' suffix), values sliced from a splitmix64-filled pool, the same
// benchmark definitions (see crates/wisckey-cli/src/bench/ops.rs and docs/BENCHMARKS.md)
// and the same report lines. An engine plugs in by implementing `Engine` and `Cursor`.
// Thread-safety: the driver runs `threads` workers that share one Engine, whose methods must
// be thread-safe (LevelDB and RocksDB DB handles are).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_io.h"

namespace wbench {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kValuePoolSeed = 0x0076616C7565ULL;
constexpr size_t kValuePoolMin = 1 << 20;

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t Next() {
    state += kGolden;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};

inline uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

inline SplitMix64 KeyStream(uint64_t seed, const std::string& name, uint64_t thread) {
  return SplitMix64(seed ^ Fnv1a64(name) ^ ((thread + 1) * kGolden));
}

inline void FormatKey(uint64_t index, size_t key_size, std::string* out) {
  std::string digits = std::to_string(index);
  out->assign(key_size > digits.size() ? key_size - digits.size() : 0, '0');
  out->append(digits);
}

class ValuePool {
 public:
  explicit ValuePool(size_t value_size) : value_size_(value_size) {
    size_t len = value_size > kValuePoolMin ? value_size : kValuePoolMin;
    SplitMix64 rng(kValuePoolSeed);
    bytes_.reserve(len + 8);
    while (bytes_.size() < len) {
      uint64_t w = rng.Next();
      for (int i = 0; i < 8; i++) bytes_.push_back(static_cast<char>((w >> (8 * i)) & 0xff));
    }
    bytes_.resize(len);
  }
  const char* Next() {
    if (next_ + value_size_ > bytes_.size()) next_ = 0;
    const char* p = bytes_.data() + next_;
    next_ += value_size_;
    return p;
  }

 private:
  std::string bytes_;
  size_t value_size_;
  size_t next_ = 0;
};

// YCSB's generators (ycsb.h's workloads and overwrite's --distribution=zipfian), a port of
// crates/wisckey-cli/src/bench/ycsb_gen.rs; floating point notes in ycsb.h.
namespace ycsb {

constexpr double kZipfianConstant = 0.99;
// YCSB's ScrambledZipfianGenerator item space and its precomputed zeta(10^10, 0.99).
constexpr uint64_t kScrambledItems = 10000000000ULL;
constexpr double kScrambledZetan = 26.46902820178302;

// A uniform double in [0, 1): the top 53 bits of splitmix64.
inline double NextDouble(SplitMix64* rng) {
  return static_cast<double>(rng->Next() >> 11) * (1.0 / 9007199254740992.0);
}

// YCSB's fnvhash64: FNV-1a over the 8 little-endian bytes, then Java's Math.abs of the signed
// result (which leaves 2^63 as it is), computed in unsigned arithmetic to avoid overflow.
inline uint64_t FnvHash64(uint64_t value) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (int i = 0; i < 8; i++) {
    hash ^= value & 0xff;
    value >>= 8;
    hash *= 1099511628211ULL;
  }
  return (hash >> 63) ? ~hash + 1 : hash;
}

inline double Zeta(uint64_t from, uint64_t to, double theta, double initial) {
  double sum = initial;
  for (uint64_t i = from; i < to; i++) sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
  return sum;
}

// Zipfian over 0..items (Gray et al., as YCSB's ZipfianGenerator), item 0 the most popular.
class Zipfian {
 public:
  explicit Zipfian(uint64_t items) : Zipfian(items, Zeta(0, items, kZipfianConstant, 0.0)) {}
  Zipfian(uint64_t items, double zetan)
      : items_(items),
        theta_(kZipfianConstant),
        alpha_(1.0 / (1.0 - kZipfianConstant)),
        zeta2_(Zeta(0, 2, kZipfianConstant, 0.0)),
        zetan_(zetan) {
    eta_ = EtaFor(items);
  }

  // A value in 0..items, after growing the item count to `items` if it is larger.
  uint64_t NextOf(SplitMix64* rng, uint64_t items) {
    if (items > items_) {
      zetan_ = Zeta(items_, items, theta_, zetan_);
      items_ = items;
      eta_ = EtaFor(items);
    }
    double u = NextDouble(rng);
    double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    double scaled = static_cast<double>(items_) * std::pow(eta_ * u - eta_ + 1.0, alpha_);
    // Rust's `as u64` saturates; the value is in [0, items] here, so a plain cast matches.
    uint64_t v = scaled <= 0 ? 0 : static_cast<uint64_t>(scaled);
    return v < items_ - 1 ? v : items_ - 1;
  }
  uint64_t Next(SplitMix64* rng) { return NextOf(rng, items_); }

 private:
  double EtaFor(uint64_t items) const {
    return (1.0 - std::pow(2.0 / static_cast<double>(items), 1.0 - theta_)) /
           (1.0 - zeta2_ / zetan_);
  }
  uint64_t items_;
  double theta_, alpha_, zeta2_, zetan_, eta_ = 0;
};

// YCSB's ScrambledZipfianGenerator over 0..items.
class ScrambledZipfian {
 public:
  explicit ScrambledZipfian(uint64_t items)
      : items_(items ? items : 1), zipf_(kScrambledItems, kScrambledZetan) {}
  uint64_t Next(SplitMix64* rng) { return FnvHash64(zipf_.Next(rng)) % items_; }

 private:
  uint64_t items_;
  Zipfian zipf_;
};

}  // namespace ycsb

struct Flags {
  std::vector<std::string> benchmarks = {"fillseq", "fillsync", "fillrandom",
                                         "overwrite", "readrandom", "readseq"};
  uint64_t num = 1000000;
  int64_t reads = -1;
  size_t value_size = 1024;
  size_t key_size = 16;
  uint64_t threads = 1;
  std::string db;
  bool use_existing_db = false;
  uint64_t seed = 301;
  size_t cache_size = 64 << 20;
  size_t write_buffer_size = 0;  // memtable bytes; 0: the engine's default.
  int bloom_bits = 10;
  bool sync = false;
  uint64_t seek_nexts = 0;
  uint64_t batch_size = 1;
  bool histogram = false;
  bool blob = false;           // RocksDB only: integrated BlobDB.
  size_t min_blob_size = 512;  // RocksDB only.
  bool pread = false;          // LevelDB only: read tables with pread, not mmap.
  std::string ycsb;            // YCSB workload a..f instead of --benchmarks (ycsb.h).
  size_t record_size = 1024;   // YCSB record (value) size.
  bool ycsb_load_only = false;  // YCSB: load only, no run phase (bench/run-ycsb.sh).
  int64_t writes = -1;         // overwrite: puts per thread (default num).
  bool zipfian = false;        // overwrite: --distribution=zipfian (YCSB scrambled zipfian).
  double report_interval_secs = 0;  // >0: a "progress:" line every this many seconds.
  double settle_secs = 0;  // idle seconds after the last benchmark, before close.
  // RocksDB --blob only (defaults are RocksDB's own).
  double blob_gc_age_cutoff = 0.25;
  double blob_gc_force_threshold = 1.0;
};

inline bool ParseBool(const std::string& v) { return v.empty() || v == "1" || v == "true"; }

inline Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      fprintf(stderr, "bad argument %s\n", a.c_str());
      exit(2);
    }
    size_t eq = a.find('=');
    std::string k = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::string v = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (k == "benchmarks") {
      f.benchmarks.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) if (!item.empty()) f.benchmarks.push_back(item);
    } else if (k == "num") f.num = strtoull(v.c_str(), nullptr, 10);
    else if (k == "reads") f.reads = strtoll(v.c_str(), nullptr, 10);
    else if (k == "value_size") f.value_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "key_size") f.key_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "threads") f.threads = strtoull(v.c_str(), nullptr, 10);
    else if (k == "db") f.db = v;
    else if (k == "use_existing_db") f.use_existing_db = ParseBool(v);
    else if (k == "seed") f.seed = strtoull(v.c_str(), nullptr, 10);
    else if (k == "cache_size") f.cache_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "write_buffer_size") f.write_buffer_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "bloom_bits") f.bloom_bits = atoi(v.c_str());
    else if (k == "sync") f.sync = ParseBool(v);
    else if (k == "seek_nexts") f.seek_nexts = strtoull(v.c_str(), nullptr, 10);
    else if (k == "batch_size") f.batch_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "histogram") f.histogram = ParseBool(v);
    else if (k == "quiet") { /* no progress bars in the peers */ }
    else if (k == "blob") f.blob = ParseBool(v);
    else if (k == "pread") f.pread = ParseBool(v);
    else if (k == "min_blob_size") f.min_blob_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "ycsb") f.ycsb = v;
    else if (k == "record_size") f.record_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "ycsb_load_only") f.ycsb_load_only = ParseBool(v);
    else if (k == "value_threshold") { /* wisckey-only knob; accepted and ignored */ }
    else if (k == "gc_space_amp_target") { /* wisckey-only knob; accepted and ignored */ }
    else if (k == "writes") f.writes = strtoll(v.c_str(), nullptr, 10);
    else if (k == "distribution") {
      if (v != "uniform" && v != "zipfian") {
        fprintf(stderr, "--distribution must be uniform or zipfian\n");
        exit(2);
      }
      f.zipfian = v == "zipfian";
    } else if (k == "report_interval_secs") f.report_interval_secs = strtod(v.c_str(), nullptr);
    else if (k == "settle_secs") f.settle_secs = strtod(v.c_str(), nullptr);
    else if (k == "blob_gc_age_cutoff") f.blob_gc_age_cutoff = strtod(v.c_str(), nullptr);
    else if (k == "blob_gc_force_threshold") f.blob_gc_force_threshold = strtod(v.c_str(), nullptr);
    else {
      fprintf(stderr, "unknown flag --%s\n", k.c_str());
      exit(2);
    }
  }
  if (f.reads < 0) f.reads = static_cast<int64_t>(f.num);
  if (f.writes < 0) f.writes = static_cast<int64_t>(f.num);
  if (f.threads == 0) f.threads = 1;
  if (f.batch_size == 0) f.batch_size = 1;
  if (std::to_string(f.num ? f.num - 1 : 0).size() > f.key_size) {
    fprintf(stderr, "--key_size=%zu cannot hold keys below %" PRIu64 "\n", f.key_size, f.num);
    exit(2);
  }
  return f;
}

// ---- engine interface and driver ----

// An iterator over the whole database; errors are reported by Error() (empty when fine).
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual void SeekToFirst() = 0;
  virtual void SeekToLast() = 0;
  virtual void Seek(const std::string& key) = 0;
  virtual void Next() = 0;
  virtual void Prev() = 0;
  virtual bool Valid() = 0;
  virtual bool KeyEquals(const std::string& key) = 0;
  virtual size_t KeySize() = 0;
  // Copies the current value into *out (so mmap'd engines really read it); returns its size.
  virtual size_t CopyValue(std::string* out) = 0;
  virtual std::string Error() = 0;
};

// Cursor over a LevelDB- or RocksDB-style iterator (same method names).
template <class It>
class IterCursor : public Cursor {
 public:
  explicit IterCursor(It* it) : it_(it) {}
  void SeekToFirst() override { it_->SeekToFirst(); }
  void SeekToLast() override { it_->SeekToLast(); }
  void Seek(const std::string& key) override { it_->Seek(key); }
  void Next() override { it_->Next(); }
  void Prev() override { it_->Prev(); }
  bool Valid() override { return it_->Valid(); }
  bool KeyEquals(const std::string& key) override { return it_->key().ToString() == key; }
  size_t KeySize() override { return it_->key().size(); }
  size_t CopyValue(std::string* out) override {
    auto v = it_->value();
    out->assign(v.data(), v.size());
    return v.size();
  }
  std::string Error() override { return it_->status().ok() ? "" : it_->status().ToString(); }

 private:
  std::unique_ptr<It> it_;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string Describe() = 0;
  virtual void Open() = 0;     // exits on error
  virtual void Close() = 0;
  virtual void Destroy() = 0;  // removes the database
  virtual void Put(const std::string& key, const char* value, size_t len, bool sync) = 0;
  virtual void Delete(const std::string& key, bool sync) = 0;
  // Returns the value length, or -1 if absent.
  virtual int64_t Get(const std::string& key) = 0;
  // Gets every key; adds found keys and key+value bytes. Default: a loop over Get.
  virtual void MultiGet(const std::vector<std::string>& keys, uint64_t* found,
                        uint64_t* bytes) {
    for (const auto& k : keys) {
      int64_t len = Get(k);
      if (len >= 0) {
        (*found)++;
        *bytes += k.size() + static_cast<uint64_t>(len);
      }
    }
  }
  virtual std::unique_ptr<Cursor> NewCursor() = 0;
  // "L0=n L1=n ..." for the stats benchmark, and an optional engine-specific line.
  virtual std::string LevelCounts() = 0;
  virtual std::string StatsExtra() { return ""; }
  // The `compact` benchmark: compact the whole key space into the last level (RocksDB with
  // --blob: blob files older than --blob_gc_age_cutoff are rewritten in key order on the
  // way). Returns false where the engine has no such call.
  virtual bool CompactAll() { return false; }
};

inline void CheckCursor(Cursor* c, const char* what) {
  std::string err = c->Error();
  if (!err.empty()) {
    fprintf(stderr, "%s: %s\n", what, err.c_str());
    exit(1);
  }
}

struct WorkerStats {
  uint64_t ops = 0, written = 0, read = 0, found = 0;
  double busy = 0;
  Latencies lat;
};

inline bool ReportsFound(const std::string& n) {
  return n == "readrandom" || n == "readmissing" || n == "multireadrandom" ||
         n == "seekrandom" || n == "readwhilewriting";
}

class Worker {
 public:
  Worker(Engine* e, const Flags& f, LiveKeys* live, const std::string& stream, uint64_t thread,
         std::atomic<uint64_t>* progress = nullptr)
      : e_(e), f_(f), live_(live), keys_(KeyStream(f.seed, stream, thread)),
        progress_(progress) {}

  WorkerStats Run(const std::string& name) {
    auto start = std::chrono::steady_clock::now();
    if (name == "fillseq" || name == "fillrandom" || name == "overwrite" || name == "fillsync") {
      Fill(name != "fillseq", name == "fillsync", name == "overwrite");
    } else if (name == "deleterandom") {
      for (uint64_t i = 0; i < f_.num; i++) {
        uint64_t idx = keys_.Next() % f_.num;
        FormatKey(idx, f_.key_size, &key_);
        auto t = Now();
        e_->Delete(key_, f_.sync);
        Done(t, 1);
        live_->Remove(idx);
        s_.written += f_.key_size;
      }
    } else if (name == "readrandom" || name == "readmissing" || name == "readwhilewriting") {
      for (int64_t i = 0; i < f_.reads; i++) {
        FormatKey(keys_.Next() % f_.num, f_.key_size, &key_);
        if (name == "readmissing") key_.push_back('.');
        auto t = Now();
        int64_t len = e_->Get(key_);
        Done(t, 1);
        if (len >= 0) {
          s_.found++;
          s_.read += key_.size() + static_cast<uint64_t>(len);
        }
      }
    } else if (name == "multireadrandom") {
      uint64_t remaining = static_cast<uint64_t>(f_.reads);
      std::vector<std::string> batch;
      while (remaining > 0) {
        uint64_t n = remaining < f_.batch_size ? remaining : f_.batch_size;
        remaining -= n;
        batch.assign(n, std::string());
        for (auto& k : batch) FormatKey(keys_.Next() % f_.num, f_.key_size, &k);
        auto t = Now();
        e_->MultiGet(batch, &s_.found, &s_.read);
        Done(t, n);
      }
    } else if (name == "readseq" || name == "readreverse") {
      bool reverse = name == "readreverse";
      std::unique_ptr<Cursor> c = e_->NewCursor();
      if (reverse) c->SeekToLast(); else c->SeekToFirst();
      for (int64_t n = 0; n < f_.reads && c->Valid(); n++) {
        auto t = Now();
        s_.read += c->KeySize() + c->CopyValue(&value_);
        if (reverse) c->Prev(); else c->Next();
        Done(t, 1);
      }
      CheckCursor(c.get(), "scan");
    } else if (name == "seekrandom") {
      for (int64_t i = 0; i < f_.reads; i++) {
        FormatKey(keys_.Next() % f_.num, f_.key_size, &key_);
        auto t = Now();
        std::unique_ptr<Cursor> c = e_->NewCursor();
        c->Seek(key_);
        if (c->Valid() && c->KeyEquals(key_)) s_.found++;
        for (uint64_t j = 0; j < f_.seek_nexts && c->Valid(); j++) {
          s_.read += c->KeySize() + c->CopyValue(&value_);
          c->Next();
        }
        CheckCursor(c.get(), "seek");
        Done(t, 1);
      }
    }
    s_.busy = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(s_);
  }

  // The readwhilewriting writer: random puts until *stop.
  WorkerStats WriteUntil(const std::atomic<bool>* stop) {
    ValuePool values(f_.value_size);
    while (!stop->load(std::memory_order_relaxed)) {
      uint64_t idx = keys_.Next() % f_.num;
      FormatKey(idx, f_.key_size, &key_);
      e_->Put(key_, values.Next(), f_.value_size, f_.sync);
      live_->Insert(idx);
      s_.ops++;
      s_.written += f_.key_size + f_.value_size;
    }
    return std::move(s_);
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point Now() { return f_.histogram ? Clock::now() : Clock::time_point(); }
  void Done(Clock::time_point t, uint64_t ops) {
    if (f_.histogram)
      s_.lat.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
    s_.ops += ops;
    if (progress_ != nullptr) progress_->fetch_add(ops, std::memory_order_relaxed);
  }
  void Fill(bool random, bool fill_sync, bool overwrite) {
    bool sync = fill_sync ? true : f_.sync;
    uint64_t count = fill_sync ? (f_.num / 1000 ? f_.num / 1000 : 1) : f_.num;
    if (overwrite) count = static_cast<uint64_t>(f_.writes);
    ValuePool values(f_.value_size);
    std::unique_ptr<ycsb::ScrambledZipfian> zipf;
    if (overwrite && f_.zipfian) zipf = std::make_unique<ycsb::ScrambledZipfian>(f_.num);
    for (uint64_t i = 0; i < count; i++) {
      uint64_t idx = zipf ? zipf->Next(&keys_) : random ? keys_.Next() % f_.num : i;
      FormatKey(idx, f_.key_size, &key_);
      auto t = Now();
      e_->Put(key_, values.Next(), f_.value_size, sync);
      Done(t, 1);
      live_->Insert(idx);
      s_.written += f_.key_size + f_.value_size;
    }
  }

  Engine* e_;
  const Flags& f_;
  LiveKeys* live_;
  SplitMix64 keys_;
  std::atomic<uint64_t>* progress_;
  std::string key_, value_;
  WorkerStats s_;
};

// With f.report_interval_secs > 0, prints "progress: t=<s since `origin`> bench=<name>
// ops=<*ops> db_bytes=<allocated bytes of f.db>" every interval until Stop(), then once more.
class ProgressLines {
 public:
  ProgressLines(const Flags& f, const std::string& name, std::chrono::steady_clock::time_point origin,
                const std::atomic<uint64_t>* ops)
      : f_(f), name_(name), origin_(origin), ops_(ops) {
    if (f.report_interval_secs <= 0) return;
    thread_ = std::thread([this] {
      auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(f_.report_interval_secs));
      auto next = std::chrono::steady_clock::now() + interval;
      while (!stop_.load(std::memory_order_relaxed)) {
        auto now = std::chrono::steady_clock::now();
        if (now >= next) {
          Line();
          next += interval;
        } else {
          auto wait = next - now;
          if (wait > std::chrono::milliseconds(20)) wait = std::chrono::milliseconds(20);
          std::this_thread::sleep_for(wait);
        }
      }
    });
  }
  void Stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    thread_.join();
    Line();
  }
  ~ProgressLines() { Stop(); }

 private:
  void Line() {
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
    printf("progress: t=%.3f bench=%s ops=%" PRIu64 " db_bytes=%" PRIu64 "\n", t, name_.c_str(),
           ops_->load(std::memory_order_relaxed), DirSizeOnDisk(f_.db));
    fflush(stdout);
  }
  const Flags& f_;
  std::string name_;
  std::chrono::steady_clock::time_point origin_;
  const std::atomic<uint64_t>* ops_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

inline SpanFacts Facts(uint64_t written, uint64_t read, const LiveKeys& live, const Flags& f) {
  SpanFacts facts;
  facts.user_written = written;
  facts.user_read = read;
  facts.has_live = live.Known();
  facts.live_bytes = live.Count() * (f.key_size + f.value_size);
  return facts;
}

inline int RunAll(Engine* e, const Flags& f) {
  static const char* known[] = {"fillseq",     "fillrandom",      "overwrite",  "fillsync",
                                "deleterandom", "readrandom",     "readmissing",
                                "multireadrandom", "readseq",     "readreverse", "seekrandom",
                                "readwhilewriting", "stats",      "compact"};
  for (const auto& b : f.benchmarks) {
    bool ok = false;
    for (const char* k : known) ok = ok || b == k;
    if (!ok) {
      fprintf(stderr, "unknown benchmark '%s'\n", b.c_str());
      return 2;
    }
  }
  printf("engine:     %s\n", e->Describe().c_str());
  printf("keys:       %zu bytes each\nvalues:     %zu bytes each (incompressible)\n",
         f.key_size, f.value_size);
  printf("entries:    %" PRIu64 "\nthreads:    %" PRIu64 "\ndb:         %s\n", f.num,
         f.threads, f.db.c_str());
  printf("------------------------------------------------\n");
  fflush(stdout);
  if (!f.use_existing_db) e->Destroy();
  Device dev;
  const Device* devp = DeviceOf(f.db, &dev) ? &dev : nullptr;
  ::sync();
  IoSample at_open = Sample(devp);
  auto origin = std::chrono::steady_clock::now();
  e->Open();
  LiveKeys live(f.num, !f.use_existing_db);
  uint64_t written_total = 0, read_total = 0;
  for (const auto& name : f.benchmarks) {
    if (name == "stats") {
      printf("%-12s : tables per level: %s\n", "stats", e->LevelCounts().c_str());
      std::string extra = e->StatsExtra();
      if (!extra.empty()) printf("%-12s   %s\n", "", extra.c_str());
      fflush(stdout);
      continue;
    }
    if (name == "compact") {
      ::sync();
      IoSample before = Sample(devp);
      auto start = std::chrono::steady_clock::now();
      if (!e->CompactAll()) {
        printf("%-12s : skipped (no full-compaction call in this engine)\n", "compact");
        continue;
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      printf("%-12s : %.3f s (whole key space)\n", "compact", secs);
      ::sync();
      PrintAmpLines(devp, before, Sample(devp), Facts(0, 0, live, f), f.db);
      fflush(stdout);
      continue;
    }
    bool fresh = name == "fillseq" || name == "fillrandom" || name == "fillsync";
    if (fresh) {
      if (f.use_existing_db) {
        printf("%-12s : skipped (--use_existing_db is true)\n", name.c_str());
        continue;
      }
      e->Close();
      e->Destroy();
      live.Reset();
      e->Open();
    }
    ::sync();
    IoSample before = Sample(devp);
    double cpu_before = CpuSeconds();
    auto start = std::chrono::steady_clock::now();
    std::atomic<bool> stop{false};
    WorkerStats writer_stats;
    std::thread writer;
    if (name == "readwhilewriting") {
      // The writer's stream is thread index `threads`, after the readers'.
      writer = std::thread([&] {
        writer_stats = Worker(e, f, &live, name, f.threads).WriteUntil(&stop);
      });
    }
    std::vector<WorkerStats> stats(f.threads);
    std::vector<std::thread> workers;
    std::atomic<uint64_t> progress{0};
    ProgressLines lines(f, name, origin, &progress);
    for (uint64_t t = 0; t < f.threads; t++)
      workers.emplace_back(
          [&, t] { stats[t] = Worker(e, f, &live, name, t, &progress).Run(name); });
    for (auto& w : workers) w.join();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lines.Stop();
    stop.store(true);
    if (writer.joinable()) writer.join();
    double cpu_after = CpuSeconds();
    WorkerStats tot;
    for (auto& s : stats) {
      tot.ops += s.ops;
      tot.written += s.written;
      tot.read += s.read;
      tot.found += s.found;
      tot.busy += s.busy;
      tot.lat.Merge(s.lat);
    }
    tot.written += writer_stats.written;
    if (wall < 1e-9) wall = 1e-9;
    uint64_t ops = tot.ops ? tot.ops : 1;
    bool found = ReportsFound(name);
    uint64_t bytes = (tot.read > 0 || found) ? tot.read : tot.written;
    printf("%-12s : %11.3f micros/op %.0f ops/sec; %6.1f MB/s", name.c_str(),
           tot.busy * 1e6 / ops, tot.ops / wall, bytes / wall / 1048576.0);
    if (found) printf(" (%" PRIu64 " of %" PRIu64 " found)", tot.found, tot.ops);
    printf("\n");
    ::sync();
    IoSample after = Sample(devp);
    SpanFacts facts = Facts(tot.written, tot.read, live, f);
    if (cpu_before >= 0 && cpu_after >= 0) {
      facts.cpu = cpu_after - cpu_before;
      facts.wall = wall;
    }
    PrintAmpLines(devp, before, after, facts, f.db);
    if (f.histogram) tot.lat.Print();
    fflush(stdout);
    written_total += tot.written;
    read_total += tot.read;
  }
  if (f.settle_secs > 0) {  // idle, DB open: background work goes on
    std::atomic<uint64_t> none{0};
    ProgressLines lines(f, "settle", origin, &none);
    std::this_thread::sleep_for(std::chrono::duration<double>(f.settle_secs));
    lines.Stop();
  }
  e->Close();
  ::sync();
  IoSample at_close = Sample(devp);
  printf("%-12s : whole run from open to close (includes background work finished by close)\n",
         "total");
  PrintAmpLines(devp, at_open, at_close, Facts(written_total, read_total, live, f), f.db);
  return 0;
}

}  // namespace wbench
