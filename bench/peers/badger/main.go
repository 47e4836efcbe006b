// Command badger_bench is the Badger peer of `wisckey bench`: same flags, workload (splitmix64
// key streams seeded seed ^ fnv1a64(name) ^ (thread+1)*golden, zero-padded decimal keys,
// values sliced from a splitmix64-filled pool) and report lines as
// crates/wisckey-cli/src/bench/. Options: Badger v4 defaults except compression off, block
// cache of --cache_size bytes, and ValueThreshold=--value_threshold (512) so that 1 KiB values
// live in the value log, as in WiscKey. Each put is its own transaction (db.Update), the
// closest Badger has to a plain Put. Workers share one *badger.DB (it is goroutine-safe).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
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

// ---- I/O accounting (see crates/wisckey-cli/src/bench/iostat.rs) ----

type device struct{ name, statPath string }

type ioSample struct {
	hasDevice, hasProcess bool
	deviceBytes, process  uint64
}

func deviceOf(path string) *device {
	var st syscall.Stat_t
	for syscall.Stat(path, &st) != nil {
		parent := filepath.Dir(path)
		if parent == path {
			return nil
		}
		path = parent
	}
	dev := uint64(st.Dev)
	major := ((dev >> 8) & 0xfff) | ((dev >> 32) &^ 0xfff)
	minor := (dev & 0xff) | ((dev >> 12) &^ 0xff)
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	if _, err := os.ReadFile(sys + "/stat"); err != nil {
		return nil
	}
	name := fmt.Sprintf("%d:%d", major, minor)
	if r, err := filepath.EvalSymlinks(sys); err == nil {
		name = filepath.Base(r)
	}
	return &device{name, sys + "/stat"}
}

func sample(d *device) ioSample {
	var s ioSample
	if d != nil {
		if b, err := os.ReadFile(d.statPath); err == nil {
			f := strings.Fields(string(b))
			if len(f) > 6 {
				if v, err := strconv.ParseUint(f[6], 10, 64); err == nil {
					s.hasDevice, s.deviceBytes = true, v*512
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/io"); err == nil {
		var written, cancelled uint64
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			v, _ := strconv.ParseUint(f[1], 10, 64)
			switch f[0] {
			case "write_bytes:":
				written, s.hasProcess = v, true
			case "cancelled_write_bytes:":
				cancelled = v
			}
		}
		if written > cancelled {
			s.process = written - cancelled
		}
	}
	return s
}

func dirSizeOnDisk(dir string) uint64 {
	var total uint64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += uint64(st.Blocks) * 512
			}
		}
		return nil
	})
	return total
}

func mib(b uint64) float64 { return float64(b) / 1048576.0 }

func ratio(w, user uint64) string {
	if user == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", float64(w)/float64(user))
}

func printIoLine(d *device, b, a ioSample, user uint64, db string) {
	var devPart, procPart string
	if d != nil && b.hasDevice && a.hasDevice {
		w := a.deviceBytes - b.deviceBytes
		devPart = fmt.Sprintf("wa=%s (device %s wrote %.1f MiB / user %.1f MiB)", ratio(w, user), d.name, mib(w), mib(user))
	} else {
		devPart = fmt.Sprintf("wa=n/a (no readable block device counter; user %.1f MiB)", mib(user))
	}
	if b.hasProcess && a.hasProcess {
		var w uint64
		if a.process > b.process {
			w = a.process - b.process
		}
		procPart = fmt.Sprintf("wa_process=%s (process wrote %.1f MiB)", ratio(w, user), mib(w))
	} else {
		procPart = "wa_process=n/a (/proc/self/io unreadable)"
	}
	fmt.Printf("%-12s   %s %s db_size=%.1f MiB\n", "", devPart, procPart, mib(dirSizeOnDisk(db)))
}

// ---- driver ----

type config struct {
	num, reads, threads, seed uint64
	valueSize, keySize        int
	cacheSize, valueThreshold int64
	sync, useExisting         bool
	db                        string
}

type stats struct {
	ops, bytes, found uint64
	busy              float64
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
		WithValueThreshold(c.valueThreshold)
	db, err := badger.Open(opts)
	must(err, "open")
	return db
}

func runWorker(db *badger.DB, c *config, name string, thread uint64) stats {
	var s stats
	start := time.Now()
	keys := keyStream(c.seed, name, thread)
	switch name {
	case "fillseq", "fillrandom", "overwrite", "fillsync":
		count, syncWrites := c.num, c.sync
		if name == "fillsync" {
			count, syncWrites = c.num/1000, true
			if count == 0 {
				count = 1
			}
		}
		values := newValuePool(c.valueSize)
		for i := uint64(0); i < count; i++ {
			idx := i
			if name != "fillseq" {
				idx = keys.next() % c.num
			}
			key, value := formatKey(idx, c.keySize), values.nextValue()
			must(db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) }), "put")
			if syncWrites {
				must(db.Sync(), "sync")
			}
			s.ops++
			s.bytes += uint64(c.keySize + c.valueSize)
		}
	case "readrandom":
		for i := uint64(0); i < c.reads; i++ {
			key := formatKey(keys.next()%c.num, c.keySize)
			err := db.View(func(txn *badger.Txn) error {
				item, err := txn.Get(key)
				if err != nil {
					return err
				}
				return item.Value(func(v []byte) error {
					s.found++
					s.bytes += uint64(len(key) + len(v))
					return nil
				})
			})
			if err != badger.ErrKeyNotFound {
				must(err, "get")
			}
			s.ops++
		}
	case "readseq":
		must(db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.DefaultIteratorOptions)
			defer it.Close()
			for it.Rewind(); it.Valid() && s.ops < c.reads; it.Next() {
				item := it.Item()
				if err := item.Value(func(v []byte) error {
					s.bytes += uint64(len(item.Key()) + len(v))
					return nil
				}); err != nil {
					return err
				}
				s.ops++
			}
			return nil
		}), "scan")
	}
	s.busy = time.Since(start).Seconds()
	return s
}

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
	bloomBits := flag.Int("bloom_bits", 10, "accepted for symmetry; Badger uses a 1% false-positive Bloom filter")
	flag.BoolVar(&c.sync, "sync", false, "")
	flag.Parse()
	_ = bloomBits
	c.reads = c.num
	if *reads >= 0 {
		c.reads = uint64(*reads)
	}
	if c.threads == 0 {
		c.threads = 1
	}
	if len(strconv.FormatUint(c.num-1, 10)) > c.keySize {
		fmt.Fprintf(os.Stderr, "--key_size=%d cannot hold keys below %d\n", c.keySize, c.num)
		os.Exit(2)
	}
	names := []string{}
	for _, b := range strings.Split(*benchmarks, ",") {
		switch b {
		case "":
		case "fillseq", "fillrandom", "overwrite", "fillsync", "readrandom", "readseq":
			names = append(names, b)
		default:
			fmt.Fprintf(os.Stderr, "unknown benchmark '%s'\n", b)
			os.Exit(2)
		}
	}
	fmt.Printf("engine:     badger %s (compression off, cache_size=%d, ValueThreshold=%d, MemTableSize=64 MiB, one txn per put)\n",
		badgerVersion(), c.cacheSize, c.valueThreshold)
	fmt.Printf("keys:       %d bytes each\nvalues:     %d bytes each (incompressible)\n", c.keySize, c.valueSize)
	fmt.Printf("entries:    %d\nthreads:    %d\ndb:         %s\n", c.num, c.threads, c.db)
	fmt.Println("------------------------------------------------")
	if !c.useExisting {
		must(os.RemoveAll(c.db), "destroy")
	}
	dev := deviceOf(c.db)
	syscall.Sync()
	atOpen := sample(dev)
	db := openDB(c)
	var userTotal uint64
	for _, name := range names {
		if name == "fillseq" || name == "fillrandom" || name == "fillsync" {
			if c.useExisting {
				fmt.Printf("%-12s : skipped (--use_existing_db is true)\n", name)
				continue
			}
			must(db.Close(), "close")
			must(os.RemoveAll(c.db), "destroy")
			db = openDB(c)
		}
		syscall.Sync()
		before := sample(dev)
		start := time.Now()
		results := make([]stats, c.threads)
		var wg sync.WaitGroup
		for t := uint64(0); t < c.threads; t++ {
			wg.Add(1)
			go func(t uint64) {
				defer wg.Done()
				results[t] = runWorker(db, c, name, t)
			}(t)
		}
		wg.Wait()
		wall := time.Since(start).Seconds()
		var tot stats
		for _, r := range results {
			tot.ops += r.ops
			tot.bytes += r.bytes
			tot.found += r.found
			tot.busy += r.busy
		}
		ops := tot.ops
		if ops == 0 {
			ops = 1
		}
		fmt.Printf("%-12s : %11.3f micros/op %.0f ops/sec; %6.1f MB/s", name, tot.busy*1e6/float64(ops), float64(tot.ops)/wall, float64(tot.bytes)/wall/1048576.0)
		if name == "readrandom" {
			fmt.Printf(" (%d of %d found)", tot.found, tot.ops)
		}
		fmt.Println()
		var user uint64
		if name != "readrandom" && name != "readseq" {
			user = tot.bytes
			userTotal += user
		}
		syscall.Sync()
		printIoLine(dev, before, sample(dev), user, c.db)
	}
	must(db.Close(), "close")
	syscall.Sync()
	fmt.Printf("%-12s : whole run from open to close (includes background work finished by close)\n", "total")
	printIoLine(dev, atOpen, sample(dev), userTotal, c.db)
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
