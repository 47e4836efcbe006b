// Command badger_bench is the Badger peer of `wisckey-bench bench`: same flags, workload (splitmix64
// key streams seeded seed ^ fnv1a64(name) ^ (thread+1)*golden, zero-padded decimal keys,
// values sliced from a splitmix64-filled pool) and report lines as
// crates/wisckey-cli/src/bench/. Options: Badger v4 defaults except compression off, block
// cache of --cache_size bytes, and ValueThreshold=--value_threshold (512) so that 1 KiB values
// live in the value log, as in WiscKey. Each put or delete is its own transaction
// (db.Update), the closest Badger has to a plain Put; each get its own read-only one;
// multireadrandom reads a batch in one read-only transaction. Values are copied out
// (ValueCopy) so mmap'd data is really read. Benchmark definitions: see
// crates/wisckey-cli/src/bench/ops.rs; measurement: measure.go. Workers share one *badger.DB
// (it is goroutine-safe).
//
// Value-log GC: off unless --gc_loop, which runs what Badger's README recommends from a
// goroutine while the DB is open: every --gc_interval_secs (1), call
// db.RunValueLogGC(--gc_discard_ratio, 0.5) again and again while it returns nil (a file
// was rewritten). --vlog_file_size sets ValueLogFileSize (default Badger's, 1 GiB - 1),
// --memtable_size MemTableSize (default 64 MiB).
// overwrite takes --writes (puts per thread, default num) and --distribution=zipfian (YCSB's
// scrambled zipfian over 0..num, ycsb.go); --report_interval_secs prints progress lines.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

const golden uint64 = 0x9E3779B97F4A7C15
const valuePoolSeed uint64 = 0x0076616C7565
const valuePoolMin = 1 << 20

type splitMix64 struct{ state uint64 }

func (r *splitMix64) next() uint64 {
	r.state += golden
	z := r.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func fnv1a64(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001B3
	}
	return h
}

func keyStream(seed uint64, name string, thread uint64) *splitMix64 {
	return &splitMix64{seed ^ fnv1a64(name) ^ ((thread + 1) * golden)}
}

func formatKey(index uint64, keySize int) []byte {
	d := strconv.FormatUint(index, 10)
	if len(d) >= keySize {
		return []byte(d)
	}
	return []byte(strings.Repeat("0", keySize-len(d)) + d)
}

type valuePool struct {
	bytes     []byte
	valueSize int
	next      int
}

func newValuePool(valueSize int) *valuePool {
	n := valuePoolMin
	if valueSize > n {
		n = valueSize
	}
	r := &splitMix64{valuePoolSeed}
	b := make([]byte, 0, n+8)
	for len(b) < n {
		w := r.next()
		for i := 0; i < 8; i++ {
			b = append(b, byte(w>>(8*i)))
		}
	}
	return &valuePool{bytes: b[:n], valueSize: valueSize}
}

func (p *valuePool) nextValue() []byte {
	if p.next+p.valueSize > len(p.bytes) {
		p.next = 0
	}
	v := p.bytes[p.next : p.next+p.valueSize]
	p.next += p.valueSize
	return v
}

// ---- driver ----

type config struct {
	num, reads, threads, seed uint64
	seekNexts, batchSize      uint64
	valueSize, keySize        int
	recordSize                int  // YCSB record (value) size (ycsb.go)
	ycsbLoadOnly              bool // YCSB: load only, no run phase (bench/run-ycsb.sh)
	cacheSize, valueThreshold int64
	sync, useExisting, hist   bool
	madvRandom                bool
	db                        string
	writes                    uint64  // overwrite: puts per thread
	zipfian                   bool    // overwrite: scrambled zipfian key choice
	reportInterval            float64 // seconds between progress lines (0 = off)
	settleSecs                float64 // idle seconds after the last benchmark, before close
	gcLoop                    bool
	gcInterval, gcDiscard     float64
	vlogFileSize              int64 // 0 = Badger's default
	memTableSize              int64 // 0 = Badger's default (64 MiB)
	// withSyncWrites: the process's writes are all sync writes (--sync, or fillsync alone)
	// and --with_sync_writes is on: the DB is opened WithSyncWrites(true), so Badger's write
	// goroutine syncs once per batch of waiting commits (its group commit), instead of a
	// db.Sync() after each Update. Off by default: db.Sync() after each Update measured
	// faster here, 1.2-1.5x at 16 threads, level at 1 (bench/results/badger-syncwrites-20261201).
	withSyncWrites bool
	progress       atomic.Uint64
	gcRewrites     atomic.Uint64 // RunValueLogGC calls that returned nil
}

type stats struct {
	ops, written, read, found uint64
	busy                      float64
	lat                       latencies
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "badger %s: %v\n", what, err)
		os.Exit(1)
	}
}

func openDB(c *config) *badger.DB {
	opts := badger.DefaultOptions(c.db).
		WithLogger(nil).
		WithCompression(options.None).
		WithBlockCacheSize(c.cacheSize).
		WithValueThreshold(c.valueThreshold).
		WithSyncWrites(c.withSyncWrites)
	if c.vlogFileSize > 0 {
		opts = opts.WithValueLogFileSize(c.vlogFileSize)
	}
	if c.memTableSize > 0 {
		opts = opts.WithMemTableSize(c.memTableSize)
	}
	db, err := badger.Open(opts)
	must(err, "open")
	if c.madvRandom {
		adviseRandomForever(c.db)
	}
	return db
}

type worker struct {
	db   *badger.DB
	c    *config
	live *liveKeys
	keys *splitMix64
	s    stats
	buf  []byte
}

func (w *worker) now() time.Time {
	if w.c.hist {
		return time.Now()
	}
	return time.Time{}
}

func (w *worker) done(t time.Time, ops uint64) {
	if w.c.hist {
		w.s.lat.samples = append(w.s.lat.samples, uint64(time.Since(t).Nanoseconds()))
	}
	w.s.ops += ops
	w.c.progress.Add(ops)
}

func (w *worker) put(key, value []byte, syncWrites bool) {
	must(w.db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) }), "put")
	if syncWrites && !w.c.withSyncWrites {
		must(w.db.Sync(), "sync")
	}
}

// get returns the value length or -1; the value is copied out (it may be mmap'd).
func (w *worker) get(txn *badger.Txn, key []byte) int {
	item, err := txn.Get(key)
	if err == badger.ErrKeyNotFound {
		return -1
	}
	must(err, "get")
	w.buf, err = item.ValueCopy(w.buf[:0])
	must(err, "get value")
	return len(w.buf)
}

func (w *worker) run(name string) stats {
	start := time.Now()
	c := w.c
	switch name {
	case "fillseq", "fillrandom", "overwrite", "fillsync":
		count, syncWrites := c.num, c.sync
		if name == "fillsync" {
			count, syncWrites = c.num/1000, true
			if count == 0 {
				count = 1
			}
		}
		var zipf *scrambledZipfian
		if name == "overwrite" {
			count = c.writes
			if c.zipfian {
				zipf = newScrambledZipfian(c.num)
			}
		}
		values := newValuePool(c.valueSize)
		for i := uint64(0); i < count; i++ {
			idx := i
			if zipf != nil {
				idx = zipf.next(w.keys)
			} else if name != "fillseq" {
				idx = w.keys.next() % c.num
			}
			key, value := formatKey(idx, c.keySize), values.nextValue()
			t := w.now()
			w.put(key, value, syncWrites)
			w.done(t, 1)
			w.live.insert(idx)
			w.s.written += uint64(c.keySize + c.valueSize)
		}
	case "deleterandom":
		for i := uint64(0); i < c.num; i++ {
			idx := w.keys.next() % c.num
			key := formatKey(idx, c.keySize)
			t := w.now()
			must(w.db.Update(func(txn *badger.Txn) error { return txn.Delete(key) }), "delete")
			if c.sync && !c.withSyncWrites {
				must(w.db.Sync(), "sync")
			}
			w.done(t, 1)
			w.live.remove(idx)
			w.s.written += uint64(c.keySize)
		}
	case "readrandom", "readmissing", "readwhilewriting":
		for i := uint64(0); i < c.reads; i++ {
			key := formatKey(w.keys.next()%c.num, c.keySize)
			if name == "readmissing" {
				key = append(key, '.')
			}
			t := w.now()
			n := -1
			must(w.db.View(func(txn *badger.Txn) error { n = w.get(txn, key); return nil }), "view")
			w.done(t, 1)
			if n >= 0 {
				w.s.found++
				w.s.read += uint64(len(key) + n)
			}
		}
	case "multireadrandom":
		// One read-only transaction per batch, a Get per key (Badger has no batched get).
		for remaining := c.reads; remaining > 0; {
			n := min(remaining, c.batchSize)
			remaining -= n
			batch := make([][]byte, n)
			for i := range batch {
				batch[i] = formatKey(w.keys.next()%c.num, c.keySize)
			}
			t := w.now()
			must(w.db.View(func(txn *badger.Txn) error {
				for _, key := range batch {
					if l := w.get(txn, key); l >= 0 {
						w.s.found++
						w.s.read += uint64(len(key) + l)
					}
				}
				return nil
			}), "multiget")
			w.done(t, n)
		}
	case "readseq", "readreverse":
		must(w.db.View(func(txn *badger.Txn) error {
			opts := badger.DefaultIteratorOptions
			opts.Reverse = name == "readreverse"
			it := txn.NewIterator(opts)
			defer it.Close()
			var err error
			for it.Rewind(); it.Valid() && w.s.ops < c.reads; it.Next() {
				t := w.now()
				item := it.Item()
				if w.buf, err = item.ValueCopy(w.buf[:0]); err != nil {
					return err
				}
				w.s.read += uint64(len(item.Key()) + len(w.buf))
				w.done(t, 1)
			}
			return nil
		}), "scan")
	case "seekrandom":
		opts := badger.DefaultIteratorOptions
		// Prefetch only what a seek will read (the default, 100, would fetch values never used).
		opts.PrefetchSize = int(max(c.seekNexts, 1))
		for i := uint64(0); i < c.reads; i++ {
			key := formatKey(w.keys.next()%c.num, c.keySize)
			t := w.now()
			must(w.db.View(func(txn *badger.Txn) error {
				it := txn.NewIterator(opts)
				defer it.Close()
				it.Seek(key)
				if it.Valid() && bytes.Equal(it.Item().Key(), key) {
					w.s.found++
				}
				var err error
				for j := uint64(0); j < c.seekNexts && it.Valid(); j++ {
					item := it.Item()
					if w.buf, err = item.ValueCopy(w.buf[:0]); err != nil {
						return err
					}
					w.s.read += uint64(len(item.Key()) + len(w.buf))
					it.Next()
				}
				return nil
			}), "seek")
			w.done(t, 1)
		}
	}
	w.s.busy = time.Since(start).Seconds()
	return w.s
}

// writeUntil is the readwhilewriting writer: random puts until stop is set.
func (w *worker) writeUntil(stop *atomic.Bool) stats {
	values := newValuePool(w.c.valueSize)
	for !stop.Load() {
		idx := w.keys.next() % w.c.num
		w.put(formatKey(idx, w.c.keySize), values.nextValue(), w.c.sync)
		w.live.insert(idx)
		w.s.ops++
		w.s.written += uint64(w.c.keySize + w.c.valueSize)
	}
	return w.s
}

func levelCounts(db *badger.DB) string {
	counts := make([]int, 7)
	for _, t := range db.Tables() {
		for len(counts) <= t.Level {
			counts = append(counts, 0)
		}
		counts[t.Level]++
	}
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = fmt.Sprintf("L%d=%d", i, n)
	}
	return strings.Join(parts, " ")
}

func reportsFound(name string) bool {
	switch name {
	case "readrandom", "readmissing", "multireadrandom", "seekrandom", "readwhilewriting":
		return true
	}
	return false
}

func facts(written, read uint64, live *liveKeys, c *config) spanFacts {
	return spanFacts{userWritten: written, userRead: read, hasLive: live.known,
		liveBytes: live.count() * uint64(c.keySize+c.valueSize), cpu: -1}
}

var known = []string{"fillseq", "fillrandom", "overwrite", "fillsync", "deleterandom",
	"readrandom", "readmissing", "multireadrandom", "readseq", "readreverse", "seekrandom",
	"readwhilewriting", "stats"}

func main() {
	c := &config{}
	benchmarks := flag.String("benchmarks", "fillseq,fillsync,fillrandom,overwrite,readrandom,readseq", "")
	flag.Uint64Var(&c.num, "num", 1000000, "")
	reads := flag.Int64("reads", -1, "")
	flag.IntVar(&c.valueSize, "value_size", 1024, "")
	flag.IntVar(&c.keySize, "key_size", 16, "")
	flag.Uint64Var(&c.threads, "threads", 1, "")
	flag.StringVar(&c.db, "db", "/tmp/badger_bench", "")
	flag.BoolVar(&c.useExisting, "use_existing_db", false, "")
	flag.Uint64Var(&c.seed, "seed", 301, "")
	flag.Int64Var(&c.cacheSize, "cache_size", 64<<20, "")
	flag.Int64Var(&c.valueThreshold, "value_threshold", 512, "")
	flag.Uint64Var(&c.seekNexts, "seek_nexts", 0, "")
	flag.Uint64Var(&c.batchSize, "batch_size", 1, "")
	flag.BoolVar(&c.hist, "histogram", false, "")
	flag.Bool("quiet", false, "accepted for symmetry; the peers draw no progress bars")
	flag.Int("bloom_bits", 10, "accepted for symmetry; Badger uses a 1% false-positive Bloom filter")
	flag.BoolVar(&c.sync, "sync", false, "")
	withSyncWrites := flag.Bool("with_sync_writes", false,
		"sync writes through WithSyncWrites(true) where every write of the process syncs; false: db.Sync() after each Update")
	flag.BoolVar(&c.madvRandom, "madv_random", false, "madvise(MADV_RANDOM) every mapped DB file (madvise.go)")
	ycsb := flag.String("ycsb", "", "YCSB workload a..f instead of --benchmarks (ycsb.go)")
	flag.IntVar(&c.recordSize, "record_size", 1024, "YCSB record (value) size")
	flag.BoolVar(&c.ycsbLoadOnly, "ycsb_load_only", false, "YCSB: the load phase only, no run phase")
	writes := flag.Int64("writes", -1, "overwrite: puts per thread (default num)")
	distribution := flag.String("distribution", "uniform", "overwrite key choice: uniform or zipfian")
	flag.Float64Var(&c.reportInterval, "report_interval_secs", 0, "progress line every this many seconds (0 = off)")
	flag.Float64Var(&c.settleSecs, "settle_secs", 0, "idle seconds (DB open, GC loop running) after the last benchmark")
	flag.BoolVar(&c.gcLoop, "gc_loop", false, "run RunValueLogGC in a loop from a goroutine")
	flag.Float64Var(&c.gcInterval, "gc_interval_secs", 1, "--gc_loop: seconds between GC rounds")
	flag.Float64Var(&c.gcDiscard, "gc_discard_ratio", 0.5, "--gc_loop: RunValueLogGC's discardRatio")
	flag.Int64Var(&c.vlogFileSize, "vlog_file_size", 0, "ValueLogFileSize in bytes (0 = Badger's default)")
	flag.Int64Var(&c.memTableSize, "memtable_size", 0, "MemTableSize in bytes (0 = Badger's default, 64 MiB)")
	flag.String("gc_space_amp_target", "", "wisckey-only knob; accepted and ignored")
	flag.Parse()
	c.writes = c.num
	if *writes >= 0 {
		c.writes = uint64(*writes)
	}
	if *distribution != "uniform" && *distribution != "zipfian" {
		fmt.Fprintln(os.Stderr, "--distribution must be uniform or zipfian")
		os.Exit(2)
	}
	c.zipfian = *distribution == "zipfian"

	c.reads = c.num
	if *reads >= 0 {
		c.reads = uint64(*reads)
	}
	c.threads = max(c.threads, 1)
	c.batchSize = max(c.batchSize, 1)
	if len(strconv.FormatUint(c.num-1, 10)) > c.keySize {
		fmt.Fprintf(os.Stderr, "--key_size=%d cannot hold keys below %d\n", c.keySize, c.num)
		os.Exit(2)
	}
	if *ycsb != "" {
		runYcsb(c, *ycsb)
		return
	}
	names := []string{}
	for _, b := range strings.Split(*benchmarks, ",") {
		if b == "" {
			continue
		}
		if !slices.Contains(known, b) {
			fmt.Fprintf(os.Stderr, "unknown benchmark '%s'\n", b)
			os.Exit(2)
		}
		names = append(names, b)
	}
	onlyFillsync := len(names) > 0
	for _, name := range names {
		onlyFillsync = onlyFillsync && name == "fillsync"
	}
	c.withSyncWrites = *withSyncWrites && (c.sync || onlyFillsync)
	fmt.Printf("engine:     %s\n", describe(c))
	fmt.Printf("keys:       %d bytes each\nvalues:     %d bytes each (incompressible)\n", c.keySize, c.valueSize)
	fmt.Printf("entries:    %d\nthreads:    %d\ndb:         %s\n", c.num, c.threads, c.db)
	fmt.Println("------------------------------------------------")
	if !c.useExisting {
		must(os.RemoveAll(c.db), "destroy")
	}
	dev := deviceOf(c.db)
	syscall.Sync()
	atOpen := sample(dev)
	origin := time.Now()
	db := openDB(c)
	stopGC := startGCLoop(db, c)
	live := newLiveKeys(c.num, !c.useExisting)
	var writtenTotal, readTotal uint64
	for _, name := range names {
		if name == "stats" {
			lsm, vlog := db.Size()
			fmt.Printf("%-12s : tables per level: %s\n", name, levelCounts(db))
			fmt.Printf("%-12s   lsm=%.1f MiB vlog=%.1f MiB\n", "", mib(uint64(lsm)), mib(uint64(vlog)))
			continue
		}
		if name == "fillseq" || name == "fillrandom" || name == "fillsync" {
			if c.useExisting {
				fmt.Printf("%-12s : skipped (--use_existing_db is true)\n", name)
				continue
			}
			stopGC()
			must(db.Close(), "close")
			must(os.RemoveAll(c.db), "destroy")
			live.reset()
			db = openDB(c)
			stopGC = startGCLoop(db, c)
		}
		syscall.Sync()
		before := sample(dev)
		cpuBefore := cpuSeconds()
		start := time.Now()
		var stop atomic.Bool
		var writerStats stats
		var writerDone sync.WaitGroup
		if name == "readwhilewriting" {
			// The writer's stream is thread index `threads`, after the readers'.
			writerDone.Add(1)
			go func() {
				defer writerDone.Done()
				w := &worker{db: db, c: c, live: live, keys: keyStream(c.seed, name, c.threads)}
				writerStats = w.writeUntil(&stop)
			}()
		}
		c.progress.Store(0)
		stopLines := startProgressLines(c, name, origin)
		results := make([]stats, c.threads)
		var wg sync.WaitGroup
		for t := uint64(0); t < c.threads; t++ {
			wg.Add(1)
			go func(t uint64) {
				defer wg.Done()
				w := &worker{db: db, c: c, live: live, keys: keyStream(c.seed, name, t)}
				results[t] = w.run(name)
			}(t)
		}
		wg.Wait()
		wall := time.Since(start).Seconds()
		stopLines()
		stop.Store(true)
		writerDone.Wait()
		cpuAfter := cpuSeconds()
		var tot stats
		for i := range results {
			r := &results[i]
			tot.ops += r.ops
			tot.written += r.written
			tot.read += r.read
			tot.found += r.found
			tot.busy += r.busy
			tot.lat.merge(&r.lat)
		}
		tot.written += writerStats.written
		ops := max(tot.ops, 1)
		found := reportsFound(name)
		b := tot.written
		if tot.read > 0 || found {
			b = tot.read
		}
		fmt.Printf("%-12s : %11.3f micros/op %.0f ops/sec; %6.1f MB/s", name, tot.busy*1e6/float64(ops), float64(tot.ops)/wall, float64(b)/wall/1048576.0)
		if found {
			fmt.Printf(" (%d of %d found)", tot.found, tot.ops)
		}
		fmt.Println()
		syscall.Sync()
		f := facts(tot.written, tot.read, live, c)
		if cpuBefore >= 0 && cpuAfter >= 0 {
			f.cpu, f.wall = cpuAfter-cpuBefore, wall
		}
		printAmpLines(dev, before, sample(dev), f, c.db)
		if c.hist {
			tot.lat.print()
		}
		writtenTotal += tot.written
		readTotal += tot.read
	}
	if c.settleSecs > 0 {
		c.progress.Store(0)
		stopLines := startProgressLines(c, "settle", origin)
		time.Sleep(time.Duration(c.settleSecs * float64(time.Second)))
		stopLines()
	}
	stopGC()
	if c.gcLoop {
		fmt.Printf("gc:         %d value-log files rewritten by RunValueLogGC(%.2f) every %.1f s\n",
			c.gcRewrites.Load(), c.gcDiscard, c.gcInterval)
	}
	must(db.Close(), "close")
	syscall.Sync()
	fmt.Printf("%-12s : whole run from open to close (includes background work finished by close)\n", "total")
	printAmpLines(dev, atOpen, sample(dev), facts(writtenTotal, readTotal, live, c), c.db)
}

func badgerVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/dgraph-io/badger/v4" {
				return dep.Version
			}
		}
	}
	return "v4 (unknown version)"
}

// describe is the "engine:" header line: version and every option that differs from stock.
func describe(c *config) string {
	mmap := "stock mmap"
	if c.madvRandom {
		mmap = "mmap with MADV_RANDOM"
	}
	gc := "no value-log GC"
	if c.gcLoop {
		gc = fmt.Sprintf("value-log GC loop: RunValueLogGC(%.2f) every %.1f s", c.gcDiscard, c.gcInterval)
	}
	vlog := "ValueLogFileSize=1 GiB"
	if c.vlogFileSize > 0 {
		vlog = fmt.Sprintf("ValueLogFileSize=%d", c.vlogFileSize)
	}
	memtable := "MemTableSize=64 MiB"
	if c.memTableSize > 0 {
		memtable = fmt.Sprintf("MemTableSize=%d", c.memTableSize)
	}
	syncs := ""
	if c.withSyncWrites {
		syncs = ", SyncWrites=true"
	}
	return fmt.Sprintf("badger %s (compression off, cache_size=%d, ValueThreshold=%d, %s, %s, one txn per put%s, %s, %s)",
		badgerVersion(), c.cacheSize, c.valueThreshold, memtable, vlog, syncs, mmap, gc)
}

// startGCLoop starts Badger's recommended GC loop (README, "Garbage Collection") on db when
// --gc_loop is set: on every tick, RunValueLogGC until it returns an error (ErrNoRewrite:
// nothing worth rewriting; ErrRejected: a GC already running). Returns a func that stops it
// and waits for a running round to finish (call it before db.Close).
func startGCLoop(db *badger.DB, c *config) func() {
	if !c.gcLoop {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(time.Duration(c.gcInterval * float64(time.Second)))
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if db.RunValueLogGC(c.gcDiscard) != nil {
					break
				}
				c.gcRewrites.Add(1)
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// startProgressLines prints, with --report_interval_secs > 0, "progress: t=<s since origin>
// bench=<name> ops=<done so far> db_bytes=<allocated bytes of --db>" every interval (plus
// gc_rewrites=<n> with --gc_loop); the returned func stops it and prints one last line.
func startProgressLines(c *config, name string, origin time.Time) func() {
	if c.reportInterval <= 0 {
		return func() {}
	}
	line := func() {
		extra := ""
		if c.gcLoop {
			extra = fmt.Sprintf(" gc_rewrites=%d", c.gcRewrites.Load())
		}
		fmt.Printf("progress: t=%.3f bench=%s ops=%d db_bytes=%d%s\n", time.Since(origin).Seconds(),
			name, c.progress.Load(), dirSizeOnDisk(c.db), extra)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(time.Duration(c.reportInterval * float64(time.Second)))
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
				line()
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		line()
	}
}
