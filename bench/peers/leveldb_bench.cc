// leveldb_bench.cc: the LevelDB peer of `wisckey-bench bench` (same flags, workload and report
// lines; see bench_common.h). Options: LevelDB defaults except compression off, an LRU block
// cache of --cache_size bytes and a Bloom filter of --bloom_bits bits per key, matching what
// wisckey is given. One leveldb::DB shared by the worker threads (it is thread-safe).
//
// --pread: stock LevelDB mmaps up to 1000 table files; under a memory limit every cold read
// then faults in the device's read-ahead window (8 MiB here) and the cache thrashes. With
// --pread, tables are read with pread(2) through an Env wrapper instead (the way RocksDB and
// wisckey read), so both behaviours can be reported.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <leveldb/cache.h>
#include <leveldb/env.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>

#include "bench_common.h"
#include "ycsb.h"

namespace {

void Check(const leveldb::Status& s, const char* what) {
  if (!s.ok()) {
    fprintf(stderr, "leveldb %s: %s\n", what, s.ToString().c_str());
    exit(1);
  }
}

// A table file read with pread(2); LevelDB calls Read from several threads at once, which
// pread allows (no shared file offset).
class PreadFile : public leveldb::RandomAccessFile {
 public:
  PreadFile(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  ~PreadFile() override { close(fd_); }
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* scratch) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return leveldb::Status::IOError(name_, strerror(errno));
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    *result = leveldb::Slice(scratch, done);
    return leveldb::Status::OK();
  }

 private:
  std::string name_;
  int fd_;
};

class PreadEnv : public leveldb::EnvWrapper {
 public:
  PreadEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}
  leveldb::Status NewRandomAccessFile(const std::string& name,
                                      leveldb::RandomAccessFile** result) override {
    int fd = open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *result = nullptr;
      return errno == ENOENT ? leveldb::Status::NotFound(name, strerror(errno))
                             : leveldb::Status::IOError(name, strerror(errno));
    }
    *result = new PreadFile(name, fd);
    return leveldb::Status::OK();
  }
};

class LevelDbEngine : public wbench::Engine {
 public:
  explicit LevelDbEngine(const wbench::Flags& f) : flags_(f) {
    cache_ = leveldb::NewLRUCache(f.cache_size);
    if (f.bloom_bits > 0) filter_ = leveldb::NewBloomFilterPolicy(f.bloom_bits);
    options_.create_if_missing = true;
    options_.compression = leveldb::kNoCompression;
    options_.block_cache = cache_;
    options_.filter_policy = filter_;
    if (f.write_buffer_size > 0) options_.write_buffer_size = f.write_buffer_size;
    if (f.pread) options_.env = &pread_env_;
  }
  ~LevelDbEngine() override {
    Close();
    delete filter_;
    delete cache_;
  }
  std::string Describe() override {
    char buf[256];
    snprintf(buf, sizeof buf,
             "leveldb %d.%d (compression off, cache_size=%zu, bloom_bits=%d, "
             "write_buffer_size=%zu, max_file_size=%zu, tables read with %s)",
             leveldb::kMajorVersion, leveldb::kMinorVersion, flags_.cache_size,
             flags_.bloom_bits, options_.write_buffer_size, options_.max_file_size,
             flags_.pread ? "pread" : "mmap");
    return buf;
  }
  void Open() override { Check(leveldb::DB::Open(options_, flags_.db, &db_), "open"); }
  void Close() override {
    delete db_;
    db_ = nullptr;
  }
  void Destroy() override { Check(leveldb::DestroyDB(flags_.db, options_), "destroy"); }
  void Put(const std::string& key, const char* value, size_t len, bool sync) override {
    leveldb::WriteOptions wo;
    wo.sync = sync;
    Check(db_->Put(wo, key, leveldb::Slice(value, len)), "put");
  }
  int64_t Get(const std::string& key) override {
    std::string value;
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), key, &value);
    if (s.IsNotFound()) return -1;
    Check(s, "get");
    return static_cast<int64_t>(value.size());
  }
  void Delete(const std::string& key, bool sync) override {
    leveldb::WriteOptions wo;
    wo.sync = sync;
    Check(db_->Delete(wo, key), "delete");
  }
  std::unique_ptr<wbench::Cursor> NewCursor() override {
    return std::make_unique<wbench::IterCursor<leveldb::Iterator>>(
        db_->NewIterator(leveldb::ReadOptions()));
  }
  bool CompactAll() override {
    db_->CompactRange(nullptr, nullptr);
    return true;
  }
  std::string LevelCounts() override {
    std::string out, v;
    for (int level = 0; level < 7; level++) {
      if (!db_->GetProperty("leveldb.num-files-at-level" + std::to_string(level), &v)) v = "?";
      out += (level ? " L" : "L") + std::to_string(level) + "=" + v;
    }
    return out;
  }

 private:
  wbench::Flags flags_;
  PreadEnv pread_env_;  // declared before options_ so it outlives every use through it
  leveldb::Options options_;
  leveldb::Cache* cache_ = nullptr;
  const leveldb::FilterPolicy* filter_ = nullptr;
  leveldb::DB* db_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  wbench::Flags f = wbench::ParseFlags(argc, argv);
  if (f.db.empty()) f.db = "/tmp/leveldb_bench";
  LevelDbEngine engine(f);
  return f.ycsb.empty() ? wbench::RunAll(&engine, f) : wbench::ycsb::RunYcsb(&engine, f);
}
