// rocksdb_bench.cc: the RocksDB peer of `wisckey-bench bench` (same flags, workload and report
// lines; see bench_common.h). Options: RocksDB defaults (WAL on, 64 MiB memtable, 2
// background jobs) except compression off everywhere, an LRU block cache of --cache_size
// bytes and a full Bloom filter of --bloom_bits bits per key. `--blob` turns on integrated
// BlobDB: enable_blob_files, min_blob_size=--min_blob_size (512), blob GC on, no blob
// compression, blob_garbage_collection_age_cutoff=--blob_gc_age_cutoff (0.25) and
// blob_garbage_collection_force_threshold=--blob_gc_force_threshold (1.0), both RocksDB's
// defaults unless given. One rocksdb::DB shared by the worker threads (it is thread-safe).
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>

#include "bench_common.h"
#include "ycsb.h"

namespace {

void Check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) {
    fprintf(stderr, "rocksdb %s: %s\n", what, s.ToString().c_str());
    exit(1);
  }
}

class RocksDbEngine : public wbench::Engine {
 public:
  explicit RocksDbEngine(const wbench::Flags& f) : flags_(f) {
    options_.create_if_missing = true;
    if (f.write_buffer_size > 0) options_.write_buffer_size = f.write_buffer_size;
    options_.compression = rocksdb::kNoCompression;
    options_.bottommost_compression = rocksdb::kNoCompression;
    options_.compression_per_level.clear();
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = rocksdb::NewLRUCache(f.cache_size);
    if (f.bloom_bits > 0) table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(f.bloom_bits));
    options_.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    if (f.blob) {
      options_.enable_blob_files = true;
      options_.min_blob_size = f.min_blob_size;
      options_.blob_compression_type = rocksdb::kNoCompression;
      options_.enable_blob_garbage_collection = true;
      options_.blob_garbage_collection_age_cutoff = f.blob_gc_age_cutoff;
      options_.blob_garbage_collection_force_threshold = f.blob_gc_force_threshold;
    }
  }
  ~RocksDbEngine() override { Close(); }
  RocksDbEngine(const RocksDbEngine&) = delete;
  RocksDbEngine& operator=(const RocksDbEngine&) = delete;
  std::string Describe() override {
    char blob[160];
    snprintf(blob, sizeof blob,
             ", enable_blob_files, min_blob_size=%zu, blob GC on, age_cutoff=%.2f, "
             "force_threshold=%.2f",
             flags_.min_blob_size, flags_.blob_gc_age_cutoff, flags_.blob_gc_force_threshold);
    char buf[480];
    snprintf(buf, sizeof buf,
             "rocksdb %d.%d.%d%s (compression off, WAL on, cache_size=%zu, bloom_bits=%d, "
             "write_buffer_size=%zu, max_background_jobs=%d%s)",
             ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH, flags_.blob ? " BlobDB" : "",
             flags_.cache_size, flags_.bloom_bits, options_.write_buffer_size,
             options_.max_background_jobs,
             flags_.blob ? blob : "");
    return buf;
  }
  void Open() override { Check(rocksdb::DB::Open(options_, flags_.db, &db_), "open"); }
  void Close() override {
    if (db_ != nullptr) {
      Check(db_->Close(), "close");
      delete db_;
      db_ = nullptr;
    }
  }
  void Destroy() override { Check(rocksdb::DestroyDB(flags_.db, options_), "destroy"); }
  void Put(const std::string& key, const char* value, size_t len, bool sync) override {
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    Check(db_->Put(wo, key, rocksdb::Slice(value, len)), "put");
  }
  int64_t Get(const std::string& key) override {
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), key, &value);
    if (s.IsNotFound()) return -1;
    Check(s, "get");
    return static_cast<int64_t>(value.size());
  }
  void Delete(const std::string& key, bool sync) override {
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    Check(db_->Delete(wo, key), "delete");
  }
  // The batched MultiGet (one call per batch).
  void MultiGet(const std::vector<std::string>& keys, uint64_t* found,
                uint64_t* bytes) override {
    size_t n = keys.size();
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::PinnableSlice> values(n);
    std::vector<rocksdb::Status> statuses(n);
    db_->MultiGet(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), n, slices.data(),
                  values.data(), statuses.data());
    for (size_t i = 0; i < n; i++) {
      if (statuses[i].IsNotFound()) continue;
      Check(statuses[i], "multiget");
      (*found)++;
      *bytes += keys[i].size() + values[i].size();
    }
  }
  std::unique_ptr<wbench::Cursor> NewCursor() override {
    return std::make_unique<wbench::IterCursor<rocksdb::Iterator>>(
        db_->NewIterator(rocksdb::ReadOptions()));
  }
  std::string LevelCounts() override {
    std::string out, v;
    for (int level = 0; level < options_.num_levels; level++) {
      if (!db_->GetProperty("rocksdb.num-files-at-level" + std::to_string(level), &v)) v = "?";
      out += (level ? " L" : "L") + std::to_string(level) + "=" + v;
    }
    return out;
  }
  bool CompactAll() override {
    rocksdb::CompactRangeOptions options;
    options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    Check(db_->CompactRange(options, nullptr, nullptr), "compact");
    return true;
  }
  std::string StatsExtra() override {
    uint64_t blobs = 0, blob_bytes = 0;
    db_->GetIntProperty("rocksdb.num-blob-files", &blobs);
    db_->GetIntProperty("rocksdb.total-blob-file-size", &blob_bytes);
    return "blob_files=" + std::to_string(blobs) + " blob_bytes=" + std::to_string(blob_bytes);
  }

 private:
  wbench::Flags flags_;
  rocksdb::Options options_;
  rocksdb::DB* db_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  wbench::Flags f = wbench::ParseFlags(argc, argv);
  if (f.db.empty()) f.db = "/tmp/rocksdb_bench";
  RocksDbEngine engine(f);
  return f.ycsb.empty() ? wbench::RunAll(&engine, f) : wbench::ycsb::RunYcsb(&engine, f);
}
