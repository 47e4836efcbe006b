// bench_common.h: the workload, flags, I/O accounting and report lines shared by the C++ peer
// programs (LevelDB, RocksDB). It mirrors crates/wisckey-cli/src/bench/ bit for bit: same
// splitmix64 key streams (seed ^ fnv1a64(name) ^ (thread+1)*GOLDEN, index = next() % num),
// zero-padded decimal keys, values sliced from a splitmix64-filled pool, and the same two
// report lines per benchmark. An engine plugs in by implementing `Engine`.
// Thread-safety: the driver runs `threads` workers that share one Engine, whose methods must
// be thread-safe (LevelDB and RocksDB DB handles are).
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <dirent.h>

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
  int bloom_bits = 10;
  bool sync = false;
  bool blob = false;           // RocksDB only: integrated BlobDB.
  size_t min_blob_size = 512;  // RocksDB only.
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
    else if (k == "bloom_bits") f.bloom_bits = atoi(v.c_str());
    else if (k == "sync") f.sync = ParseBool(v);
    else if (k == "blob") f.blob = ParseBool(v);
    else if (k == "min_blob_size") f.min_blob_size = strtoull(v.c_str(), nullptr, 10);
    else if (k == "value_threshold") { /* wisckey-only knob; accepted and ignored */ }
    else {
      fprintf(stderr, "unknown flag --%s\n", k.c_str());
      exit(2);
    }
  }
  if (f.reads < 0) f.reads = static_cast<int64_t>(f.num);
  if (f.threads == 0) f.threads = 1;
  if (std::to_string(f.num ? f.num - 1 : 0).size() > f.key_size) {
    fprintf(stderr, "--key_size=%zu cannot hold keys below %" PRIu64 "\n", f.key_size, f.num);
    exit(2);
  }
  return f;
}

// ---- I/O accounting (see crates/wisckey-cli/src/bench/iostat.rs) ----

struct Device {
  std::string name;
  std::string stat_path;
};

inline bool DeviceOf(std::string path, Device* out) {
  struct stat st;
  while (stat(path.c_str(), &st) != 0) {
    size_t slash = path.find_last_of('/');
    if (slash == std::string::npos || path == "/") return false;
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  char sys[64];
  snprintf(sys, sizeof sys, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
  out->stat_path = std::string(sys) + "/stat";
  std::ifstream probe(out->stat_path);
  if (!probe.good()) return false;
  char resolved[4096];
  if (realpath(sys, resolved) != nullptr) {
    std::string r = resolved;
    out->name = r.substr(r.find_last_of('/') + 1);
  } else {
    out->name = sys + 15;
  }
  return true;
}

struct IoSample {
  bool has_device = false, has_process = false;
  uint64_t device_bytes = 0, process_bytes = 0;
};

inline IoSample Sample(const Device* dev) {
  IoSample s;
  if (dev != nullptr) {
    std::ifstream in(dev->stat_path);
    uint64_t v[7];
    bool ok = true;
    for (int i = 0; i < 7 && ok; i++) ok = static_cast<bool>(in >> v[i]);
    if (ok) {
      s.has_device = true;
      s.device_bytes = v[6] * 512;
    }
  }
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t val, written = 0, cancelled = 0;
  bool got = false;
  while (io >> key >> val) {
    if (key == "write_bytes:") { written = val; got = true; }
    if (key == "cancelled_write_bytes:") cancelled = val;
  }
  if (got) {
    s.has_process = true;
    s.process_bytes = written > cancelled ? written - cancelled : 0;
  }
  return s;
}

inline uint64_t DirSizeOnDisk(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  uint64_t total = 0;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string p = dir + "/" + n;
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) total += DirSizeOnDisk(p);
    else total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  closedir(d);
  return total;
}

inline double MiB(uint64_t b) { return b / 1048576.0; }

inline std::string Ratio(uint64_t w, uint64_t user) {
  if (user == 0) return "n/a";
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", static_cast<double>(w) / user);
  return buf;
}

inline void PrintIoLine(const Device* dev, const IoSample& b, const IoSample& a,
                        uint64_t user, const std::string& db) {
  std::string dev_part, proc_part;
  char buf[512];
  if (dev != nullptr && b.has_device && a.has_device) {
    uint64_t w = a.device_bytes - b.device_bytes;
    snprintf(buf, sizeof buf, "wa=%s (device %s wrote %.1f MiB / user %.1f MiB)",
             Ratio(w, user).c_str(), dev->name.c_str(), MiB(w), MiB(user));
  } else {
    snprintf(buf, sizeof buf, "wa=n/a (no readable block device counter; user %.1f MiB)",
             MiB(user));
  }
  dev_part = buf;
  if (b.has_process && a.has_process) {
    uint64_t w = a.process_bytes > b.process_bytes ? a.process_bytes - b.process_bytes : 0;
    snprintf(buf, sizeof buf, "wa_process=%s (process wrote %.1f MiB)", Ratio(w, user).c_str(),
             MiB(w));
  } else {
    snprintf(buf, sizeof buf, "wa_process=n/a (/proc/self/io unreadable)");
  }
  proc_part = buf;
  printf("%-12s   %s %s db_size=%.1f MiB\n", "", dev_part.c_str(), proc_part.c_str(),
         MiB(DirSizeOnDisk(db)));
  fflush(stdout);
}

// ---- engine interface and driver ----

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string Describe() = 0;
  virtual void Open() = 0;     // exits on error
  virtual void Close() = 0;
  virtual void Destroy() = 0;  // removes the database
  virtual void Put(const std::string& key, const char* value, size_t len, bool sync) = 0;
  // Returns the value length, or -1 if absent.
  virtual int64_t Get(const std::string& key) = 0;
  // Scans up to `limit` entries from the first; returns entries and adds bytes to *bytes.
  virtual uint64_t Scan(uint64_t limit, uint64_t* bytes) = 0;
};

struct WorkerStats {
  uint64_t ops = 0, bytes = 0, found = 0;
  double busy = 0;
};

inline WorkerStats RunWorker(Engine* e, const Flags& f, const std::string& name,
                             uint64_t thread) {
  WorkerStats s;
  auto start = std::chrono::steady_clock::now();
  SplitMix64 keys = KeyStream(f.seed, name, thread);
  std::string key;
  if (name == "fillseq" || name == "fillrandom" || name == "overwrite" || name == "fillsync") {
    bool random = name != "fillseq";
    bool sync = name == "fillsync" ? true : f.sync;
    uint64_t count = name == "fillsync" ? (f.num / 1000 ? f.num / 1000 : 1) : f.num;
    ValuePool values(f.value_size);
    for (uint64_t i = 0; i < count; i++) {
      FormatKey(random ? keys.Next() % f.num : i, f.key_size, &key);
      e->Put(key, values.Next(), f.value_size, sync);
      s.ops++;
      s.bytes += f.key_size + f.value_size;
    }
  } else if (name == "readrandom") {
    for (int64_t i = 0; i < f.reads; i++) {
      FormatKey(keys.Next() % f.num, f.key_size, &key);
      int64_t len = e->Get(key);
      if (len >= 0) {
        s.found++;
        s.bytes += key.size() + static_cast<uint64_t>(len);
      }
      s.ops++;
    }
  } else if (name == "readseq") {
    s.ops = e->Scan(static_cast<uint64_t>(f.reads), &s.bytes);
  }
  s.busy = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

inline int RunAll(Engine* e, const Flags& f) {
  static const char* known[] = {"fillseq", "fillrandom", "overwrite", "fillsync",
                                "readrandom", "readseq"};
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
  e->Open();
  uint64_t user_total = 0;
  for (const auto& name : f.benchmarks) {
    bool fresh = name == "fillseq" || name == "fillrandom" || name == "fillsync";
    if (fresh) {
      if (f.use_existing_db) {
        printf("%-12s : skipped (--use_existing_db is true)\n", name.c_str());
        continue;
      }
      e->Close();
      e->Destroy();
      e->Open();
    }
    ::sync();
    IoSample before = Sample(devp);
    auto start = std::chrono::steady_clock::now();
    std::vector<WorkerStats> stats(f.threads);
    std::vector<std::thread> workers;
    for (uint64_t t = 0; t < f.threads; t++)
      workers.emplace_back([&, t] { stats[t] = RunWorker(e, f, name, t); });
    for (auto& w : workers) w.join();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WorkerStats tot;
    for (auto& s : stats) {
      tot.ops += s.ops;
      tot.bytes += s.bytes;
      tot.found += s.found;
      tot.busy += s.busy;
    }
    if (wall < 1e-9) wall = 1e-9;
    uint64_t ops = tot.ops ? tot.ops : 1;
    printf("%-12s : %11.3f micros/op %.0f ops/sec; %6.1f MB/s", name.c_str(),
           tot.busy * 1e6 / ops, tot.ops / wall, tot.bytes / wall / 1048576.0);
    if (name == "readrandom")
      printf(" (%" PRIu64 " of %" PRIu64 " found)", tot.found, tot.ops);
    printf("\n");
    bool writes = name != "readrandom" && name != "readseq";
    ::sync();
    IoSample after = Sample(devp);
    PrintIoLine(devp, before, after, writes ? tot.bytes : 0, f.db);
    if (writes) user_total += tot.bytes;
  }
  e->Close();
  ::sync();
  IoSample at_close = Sample(devp);
  printf("%-12s : whole run from open to close (includes background work finished by close)\n",
         "total");
  PrintIoLine(devp, at_open, at_close, user_total, f.db);
  return 0;
}

}  // namespace wbench
