// bench_io.h: the measurement half of the C++ peers, mirroring
// crates/wisckey-cli/src/bench/{iostat,histogram,live}.rs and printing the same lines:
// device counters (/sys/dev/block/M:m/stat sectors read/written), process counters
// (/proc/self/io read_bytes, write_bytes - cancelled_write_bytes), getrusage CPU time,
// allocated size of the DB directory, the live-key bitmap for space amplification, and a
// latency histogram that keeps every sample (exact nearest-rank percentiles, integer rank
// ceil(count * p_in_100000ths / 100000)). Thread-safety: LiveKeys is atomic; a Latencies is
// owned by one worker and merged after join; the rest are stateless functions.
#pragma once

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace wbench {

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
  uint64_t device_bytes = 0, process_bytes = 0;            // written
  uint64_t device_read_bytes = 0, process_read_bytes = 0;  // read
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
      s.device_read_bytes = v[2] * 512;
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
    if (key == "read_bytes:") s.process_read_bytes = val;
  }
  if (got) {
    s.has_process = true;
    s.process_bytes = written > cancelled ? written - cancelled : 0;
  }
  return s;
}

// CPU seconds (user + system) of every thread of this process; negative if unreadable.
inline double CpuSeconds() {
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
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

// What the harness knows about one measured span besides the counters (see iostat.rs).
struct SpanFacts {
  uint64_t user_written = 0, user_read = 0;
  bool has_live = false;
  uint64_t live_bytes = 0;
  double cpu = -1, wall = 0;
};

inline void PrintAmpLines(const Device* dev, const IoSample& b, const IoSample& a,
                          const SpanFacts& f, const std::string& db) {
  uint64_t db_bytes = DirSizeOnDisk(db);
  char buf[512];
  std::string line;
  uint64_t user = f.user_written;
  if (dev != nullptr && b.has_device && a.has_device) {
    uint64_t w = a.device_bytes - b.device_bytes;
    snprintf(buf, sizeof buf, "wa=%s (device %s wrote %.1f MiB / user %.1f MiB)",
             Ratio(w, user).c_str(), dev->name.c_str(), MiB(w), MiB(user));
  } else {
    snprintf(buf, sizeof buf, "wa=n/a (no readable block device counter; user %.1f MiB)",
             MiB(user));
  }
  line = buf;
  if (b.has_process && a.has_process) {
    uint64_t w = a.process_bytes > b.process_bytes ? a.process_bytes - b.process_bytes : 0;
    snprintf(buf, sizeof buf, " wa_process=%s (process wrote %.1f MiB)",
             Ratio(w, user).c_str(), MiB(w));
  } else {
    snprintf(buf, sizeof buf, " wa_process=n/a (/proc/self/io unreadable)");
  }
  line += buf;
  printf("%-12s   %s db_size=%.1f MiB\n", "", line.c_str(), MiB(db_bytes));

  uint64_t ur = f.user_read;
  if (dev != nullptr && b.has_device && a.has_device) {
    uint64_t r = a.device_read_bytes - b.device_read_bytes;
    snprintf(buf, sizeof buf, "ra=%s (device %s read %.1f MiB / user %.1f MiB)",
             Ratio(r, ur).c_str(), dev->name.c_str(), MiB(r), MiB(ur));
  } else {
    snprintf(buf, sizeof buf, "ra=n/a (no readable block device counter; user %.1f MiB)",
             MiB(ur));
  }
  line = buf;
  if (b.has_process && a.has_process) {
    uint64_t r = a.process_read_bytes > b.process_read_bytes
                     ? a.process_read_bytes - b.process_read_bytes
                     : 0;
    snprintf(buf, sizeof buf, " ra_process=%s (process read %.1f MiB)", Ratio(r, ur).c_str(),
             MiB(r));
  } else {
    snprintf(buf, sizeof buf, " ra_process=n/a (/proc/self/io unreadable)");
  }
  line += buf;
  if (f.has_live) {
    snprintf(buf, sizeof buf, " space_amp=%s (db %.1f MiB / live %.1f MiB)",
             Ratio(db_bytes, f.live_bytes).c_str(), MiB(db_bytes), MiB(f.live_bytes));
  } else {
    snprintf(buf, sizeof buf, " space_amp=n/a (live bytes unknown: existing db)");
  }
  line += buf;
  if (f.cpu >= 0 && f.wall > 0) {
    snprintf(buf, sizeof buf, " cpu=%.0f%% (user+sys %.2f s / wall %.2f s)",
             f.cpu / f.wall * 100.0, f.cpu, f.wall);
  } else {
    snprintf(buf, sizeof buf, " cpu=n/a");
  }
  line += buf;
  printf("%-12s   %s\n", "", line.c_str());
  fflush(stdout);
}

// One bit per key index in 0..num: set by puts, cleared by deletes (see live.rs).
class LiveKeys {
 public:
  LiveKeys(uint64_t num, bool known) : words_((num + 63) / 64), known_(known) {
    Reset(known);
  }
  void Reset(bool known = true) {
    for (auto& w : words_) w.store(0, std::memory_order_relaxed);
    known_ = known;
  }
  void Insert(uint64_t i) {
    if (i / 64 < words_.size()) words_[i / 64].fetch_or(1ULL << (i % 64), std::memory_order_relaxed);
  }
  void Remove(uint64_t i) {
    if (i / 64 < words_.size())
      words_[i / 64].fetch_and(~(1ULL << (i % 64)), std::memory_order_relaxed);
  }
  bool Known() const { return known_; }
  uint64_t Count() const {
    uint64_t n = 0;
    for (auto& w : words_) n += __builtin_popcountll(w.load(std::memory_order_relaxed));
    return n;
  }

 private:
  std::vector<std::atomic<uint64_t>> words_;
  bool known_;
};

// Latency samples in nanoseconds; printed like histogram.rs's report().
class Latencies {
 public:
  void Record(uint64_t nanos) { samples_.push_back(nanos); }
  void Merge(const Latencies& o) {
    samples_.insert(samples_.end(), o.samples_.begin(), o.samples_.end());
  }
  uint64_t Count() const { return samples_.size(); }
  // Nearest-rank percentile given in 100000ths, in microseconds (0 when empty).
  double PercentileMicros(uint64_t per_100k) {
    if (samples_.empty()) return 0;
    if (!std::is_sorted(samples_.begin(), samples_.end()))
      std::sort(samples_.begin(), samples_.end());
    return At(per_100k);
  }
  void Print() {
    printf("Microseconds per op:\n");
    if (samples_.empty()) {
      printf("Count: 0\n");
      return;
    }
    std::sort(samples_.begin(), samples_.end());
    double sum = 0, sq = 0;
    for (uint64_t s : samples_) {
      sum += s;
      sq += static_cast<double>(s) * s;
    }
    double n = samples_.size(), mean = sum / n;
    double var = sq / n - mean * mean;
    printf("Count: %" PRIu64 "  Average: %.4f  StdDev: %.2f\n", Count(), mean / 1000.0,
           std::sqrt(var > 0 ? var : 0) / 1000.0);
    printf("Min: %.3f  Median: %.3f  Max: %.3f\n", samples_.front() / 1000.0, At(50000),
           samples_.back() / 1000.0);
    printf("Percentiles: P50: %.2f P75: %.2f P99: %.2f P99.9: %.2f P99.99: %.2f\n", At(50000),
           At(75000), At(99000), At(99900), At(99990));
  }

 private:
  // Nearest-rank percentile given in 100000ths, in microseconds; samples_ sorted.
  double At(uint64_t per_100k) const {
    uint64_t n = samples_.size();
    uint64_t rank = (n * per_100k + 99999) / 100000;
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return samples_[rank - 1] / 1000.0;
  }
  std::vector<uint64_t> samples_;
};

}  // namespace wbench
