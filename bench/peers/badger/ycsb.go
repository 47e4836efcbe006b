// YCSB core workloads A-F for the Badger peer (`--ycsb=a..f --record_size=N`), a port of
// crates/wisckey-cli/src/bench/ycsb.rs and ycsb_gen.rs and bench/peers/ycsb.h (definitions in
// docs/BENCHMARKS.md, "YCSB core workloads"). For the same --seed, --num, --reads and one
// thread, every engine sees the same operation and key sequence, so per-op counts and found
// counts agree exactly (bench/run-ycsb.sh CHECK=1 compares them).
//
// Bit-identical floating point: Go's math.Pow is not glibc's pow (which Rust's powf and C++'s
// std::pow call), and one ulp can move a zipfian draw over 10^10 items to another integer,
// after which the redraw loop desynchronises the whole stream. So pow and the zeta sums go
// through cgo to glibc; products are wrapped in float64() so the compiler cannot fuse them.
// Workers share the *badger.DB and the atomic insert counter; each owns its generators, built
// before the run phase's clock starts.
package main

/*
#cgo LDFLAGS: -lm
#include <math.h>
#include <stdint.h>
static double ycsb_zeta(uint64_t from, uint64_t to, double theta, double initial) {
	double sum = initial;
	for (uint64_t i = from; i < to; i++) sum += 1.0 / pow((double)(i + 1), theta);
	return sum;
}
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

const (
	zipfianConstant = 0.99
	scrambledItems  = uint64(10_000_000_000) // YCSB's ScrambledZipfianGenerator item space
	scrambledZetan  = 26.46902820178302      // its precomputed zeta(10^10, 0.99)
	maxScan         = 100
	opCount         = 5 // read, update, insert, scan, rmw
)

var opNames = [opCount]string{"read", "update", "insert", "scan", "rmw"}

func cpow(x, y float64) float64 { return float64(C.pow(C.double(x), C.double(y))) }

func zeta(from, to uint64, theta, initial float64) float64 {
	return float64(C.ycsb_zeta(C.uint64_t(from), C.uint64_t(to), C.double(theta), C.double(initial)))
}

// nextDouble is a uniform double in [0, 1): the top 53 bits of splitmix64.
func nextDouble(r *splitMix64) float64 {
	return float64(r.next()>>11) * (1.0 / 9007199254740992.0)
}

// fnvHash64 is YCSB's: FNV-1a over the 8 little-endian bytes, then Java's Math.abs of the
// signed result (2^63 stays as it is).
func fnvHash64(value uint64) uint64 {
	hash := uint64(0xCBF29CE484222325)
	for i := 0; i < 8; i++ {
		hash ^= value & 0xff
		value >>= 8
		hash *= 1099511628211
	}
	if hash>>63 != 0 {
		return ^hash + 1
	}
	return hash
}

// zipfian over 0..items (Gray et al., as YCSB's ZipfianGenerator), item 0 the most popular.
type zipfian struct {
	items                           uint64
	theta, alpha, zeta2, zetan, eta float64
}

func newZipfianWithZeta(items uint64, zetan float64) *zipfian {
	z := &zipfian{items: items, theta: zipfianConstant, alpha: 1.0 / (1.0 - zipfianConstant),
		zeta2: zeta(0, 2, zipfianConstant, 0), zetan: zetan}
	z.eta = z.etaFor(items)
	return z
}

func newZipfian(items uint64) *zipfian {
	return newZipfianWithZeta(items, zeta(0, items, zipfianConstant, 0))
}

func (z *zipfian) etaFor(items uint64) float64 {
	return (1.0 - cpow(2.0/float64(items), 1.0-z.theta)) / (1.0 - z.zeta2/z.zetan)
}

// nextOf is a value in 0..items, after growing the item count to items if it is larger.
func (z *zipfian) nextOf(r *splitMix64, items uint64) uint64 {
	if items > z.items {
		z.zetan = zeta(z.items, items, z.theta, z.zetan)
		z.items = items
		z.eta = z.etaFor(items)
	}
	u := nextDouble(r)
	uz := float64(u * z.zetan)
	if uz < 1.0 {
		return 0
	}
	if uz < 1.0+cpow(0.5, z.theta) {
		return 1
	}
	base := float64(float64(z.eta*u)-z.eta) + 1.0
	scaled := float64(float64(z.items) * cpow(base, z.alpha))
	v := uint64(0)
	if scaled > 0 {
		v = uint64(scaled)
	}
	return min(v, z.items-1)
}

type scrambledZipfian struct {
	items uint64
	zipf  *zipfian
}

func newScrambledZipfian(items uint64) *scrambledZipfian {
	return &scrambledZipfian{items: max(items, 1), zipf: newZipfianWithZeta(scrambledItems, scrambledZetan)}
}

func (s *scrambledZipfian) next(r *splitMix64) uint64 {
	return fnvHash64(s.zipf.nextOf(r, s.zipf.items)) % s.items
}

type ycsbWorkload struct {
	name   byte
	mix    [opCount]float64
	latest bool
}

func parseYcsbWorkload(s string) (ycsbWorkload, bool) {
	table := map[string]ycsbWorkload{
		"a": {'a', [opCount]float64{0.5, 0.5, 0, 0, 0}, false},
		"b": {'b', [opCount]float64{0.95, 0.05, 0, 0, 0}, false},
		"c": {'c', [opCount]float64{1.0, 0, 0, 0, 0}, false},
		"d": {'d', [opCount]float64{0.95, 0, 0.05, 0, 0}, true},
		"e": {'e', [opCount]float64{0, 0, 0.05, 0.95, 0}, false},
		"f": {'f', [opCount]float64{0.5, 0, 0, 0, 0.5}, false},
	}
	if len(s) == 1 && s[0] >= 'A' && s[0] <= 'Z' {
		s = string(s[0] + 'a' - 'A')
	}
	w, ok := table[s]
	return w, ok
}

// pickOp compares u against the cumulative proportions (read, update, insert, scan, rmw).
func (w *ycsbWorkload) pickOp(u float64) int {
	acc := 0.0
	for i, p := range w.mix {
		acc += p
		if u < acc {
			return i
		}
	}
	for i := opCount - 1; i >= 0; i-- {
		if w.mix[i] > 0 {
			return i
		}
	}
	return 0
}

func recordKey(record uint64, keySize int) []byte {
	modulus := uint64(1)
	for i := 0; i < min(keySize, 19); i++ {
		modulus *= 10
	}
	return formatKey(fnvHash64(record)%modulus, keySize)
}

type phaseResult struct {
	ops, userWritten, userRead uint64
	found                      [opCount]uint64 // read/rmw: keys found; scan: entries returned
	wall                       float64
	lat                        [opCount]latencies
}

type ycsbWorker struct {
	w         *worker
	wl        *ycsbWorkload
	rng       *splitMix64
	scrambled *scrambledZipfian
	latest    *zipfian // D only
	inserted  *atomic.Uint64
	values    *valuePool
	r         phaseResult
}

func (y *ycsbWorker) run() phaseResult {
	c := y.w.c
	recordBytes := uint64(c.keySize + c.recordSize)
	for i := uint64(0); i < c.reads; i++ {
		op := y.wl.pickOp(nextDouble(y.rng))
		var record uint64
		if op == 2 {
			record = y.inserted.Add(1) - 1
		} else {
			record = y.chooseRecord()
		}
		key := recordKey(record, c.keySize)
		start := time.Now()
		switch op {
		case 0:
			if y.read(key) {
				y.r.found[0]++
			}
		case 1, 2:
			y.w.put(key, y.values.nextValue(), false)
			y.r.userWritten += recordBytes
		case 3:
			y.r.found[3] += y.scan(key)
		default:
			if y.read(key) {
				y.r.found[4]++
			}
			y.w.put(key, y.values.nextValue(), false)
			y.r.userWritten += recordBytes
		}
		y.r.lat[op].samples = append(y.r.lat[op].samples, uint64(time.Since(start).Nanoseconds()))
		y.r.ops++
	}
	return y.r
}

func (y *ycsbWorker) chooseRecord() uint64 {
	inserted := max(y.inserted.Load(), 1)
	if y.wl.latest {
		last := inserted - 1
		return last - min(y.latest.nextOf(y.rng, last+1), last)
	}
	for {
		if record := y.scrambled.next(y.rng); record < inserted {
			return record
		}
	}
}

func (y *ycsbWorker) read(key []byte) bool {
	found := false
	must(y.w.db.View(func(txn *badger.Txn) error {
		if n := y.w.get(txn, key); n >= 0 {
			found = true
			y.r.userRead += uint64(len(key) + n)
		}
		return nil
	}), "get")
	return found
}

// scan seeks to key and copies up to uniform(1..=100) entries; returns how many it read.
func (y *ycsbWorker) scan(key []byte) uint64 {
	length := 1 + y.rng.next()%maxScan
	var entries uint64
	opts := badger.DefaultIteratorOptions
	opts.PrefetchSize = int(length)
	must(y.w.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(opts)
		defer it.Close()
		var err error
		for it.Seek(key); it.Valid() && entries < length; it.Next() {
			item := it.Item()
			if y.w.buf, err = item.ValueCopy(y.w.buf[:0]); err != nil {
				return err
			}
			y.r.userRead += uint64(len(item.Key()) + len(y.w.buf))
			entries++
		}
		return nil
	}), "scan")
	return entries
}

func ycsbLoad(db *badger.DB, c *config) phaseResult {
	perThread := (c.num + c.threads - 1) / c.threads
	parts := make([]phaseResult, c.threads)
	var wg sync.WaitGroup
	start := time.Now()
	for t := uint64(0); t < c.threads; t++ {
		wg.Add(1)
		go func(t uint64) {
			defer wg.Done()
			w := &worker{db: db, c: c}
			values := newValuePool(c.recordSize)
			for record := t * perThread; record < min((t+1)*perThread, c.num); record++ {
				key := recordKey(record, c.keySize)
				op := time.Now()
				w.put(key, values.nextValue(), false)
				parts[t].lat[2].samples = append(parts[t].lat[2].samples, uint64(time.Since(op).Nanoseconds()))
				parts[t].ops++
			}
		}(t)
	}
	wg.Wait()
	var total phaseResult
	total.wall = time.Since(start).Seconds()
	for i := range parts {
		total.ops += parts[i].ops
		total.lat[2].merge(&parts[i].lat[2])
	}
	total.userWritten = total.ops * uint64(c.keySize+c.recordSize)
	return total
}

func ycsbRun(db *badger.DB, c *config, wl *ycsbWorkload) phaseResult {
	var inserted atomic.Uint64
	inserted.Store(c.num)
	expectedInserts := float64(c.reads*c.threads) * wl.mix[2]
	zipfItems := c.num + uint64(2.0*expectedInserts)
	parts := make([]phaseResult, c.threads)
	// Everything the workers need, before the clock starts: latest's zipfian (an O(num) zeta
	// sum; D only) built once and copied to each worker, the op streams and value pools.
	var latest *zipfian
	if wl.latest {
		latest = newZipfian(max(c.num, 1))
	}
	workers := make([]*ycsbWorker, c.threads)
	for t := range workers {
		workers[t] = &ycsbWorker{w: &worker{db: db, c: c}, wl: wl,
			rng: keyStream(c.seed, "ycsb-"+string(wl.name), uint64(t)), scrambled: newScrambledZipfian(zipfItems),
			inserted: &inserted, values: newValuePool(c.recordSize)}
		if latest != nil {
			copied := *latest // plain values: a full copy
			workers[t].latest = &copied
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	for t := range workers {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			parts[t] = workers[t].run()
		}(t)
	}
	wg.Wait()
	var total phaseResult
	total.wall = time.Since(start).Seconds()
	for i := range parts {
		p := &parts[i]
		total.ops += p.ops
		total.userWritten += p.userWritten
		total.userRead += p.userRead
		for op := 0; op < opCount; op++ {
			total.found[op] += p.found[op]
			total.lat[op].merge(&p.lat[op])
		}
	}
	return total
}

// printOpLines prints `  read   : count N  found F  p50 X  p99 Y  p99.9 Z  (us)` per op type.
func printOpLines(r *phaseResult, load bool) {
	for i := 0; i < opCount; i++ {
		l := &r.lat[i]
		if len(l.samples) == 0 || (load && i != 2) {
			continue
		}
		l.sort()
		found := ""
		if !load && (i == 0 || i == 3 || i == 4) {
			found = fmt.Sprintf("  found %d", r.found[i])
		}
		fmt.Printf("  %-6s : count %d%s  p50 %.2f  p99 %.2f  p99.9 %.2f  (us)\n", opNames[i],
			len(l.samples), found, l.at(50000), l.at(99000), l.at(99900))
	}
}

// runYcsb loads (unless --use_existing_db) and runs the workload (unless --ycsb_load_only),
// printing the same lines as `wisckey-bench bench --ycsb`.
func runYcsb(c *config, name string) {
	wl, ok := parseYcsbWorkload(name)
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown YCSB workload '%s' (a..f)\n", name)
		os.Exit(2)
	}
	fmt.Printf("engine:     %s\n", describe(c))
	fmt.Printf("keys:       %d bytes each\nvalues:     %d bytes each (incompressible)\n", c.keySize, c.recordSize)
	fmt.Printf("entries:    %d\nthreads:    %d\ndb:         %s\n", c.num, c.threads, c.db)
	fmt.Println("------------------------------------------------")
	fmt.Printf("ycsb:       workload %c record_size=%d\n", wl.name, c.recordSize)
	if !c.useExisting {
		must(os.RemoveAll(c.db), "destroy")
	}
	dev := deviceOf(c.db)
	db := openDB(c)
	for _, load := range []bool{true, false} {
		phase := "run"
		if load {
			phase = "load"
		}
		label := fmt.Sprintf("ycsb-%c-%s", wl.name, phase)
		if load && c.useExisting {
			fmt.Printf("%s : skipped (--use_existing_db is true)\n", label)
			continue
		}
		if !load && c.ycsbLoadOnly {
			fmt.Printf("%s : skipped (--ycsb_load_only is true)\n", label)
			continue
		}
		syscall.Sync()
		before := sample(dev)
		cpuBefore := cpuSeconds()
		var r phaseResult
		if load {
			r = ycsbLoad(db, c)
		} else {
			r = ycsbRun(db, c, &wl)
		}
		cpuAfter := cpuSeconds()
		wall := max(r.wall, 1e-9)
		fmt.Printf("%-12s : %11.3f micros/op %.0f ops/sec\n", label,
			wall*1e6*float64(c.threads)/float64(max(r.ops, 1)), float64(r.ops)/wall)
		syscall.Sync()
		f := spanFacts{userWritten: r.userWritten, userRead: r.userRead, hasLive: !c.useExisting,
			liveBytes: c.num * uint64(c.keySize+c.recordSize), cpu: -1}
		if cpuBefore >= 0 && cpuAfter >= 0 {
			f.cpu, f.wall = cpuAfter-cpuBefore, r.wall
		}
		printAmpLines(dev, before, sample(dev), f, c.db)
		printOpLines(&r, load)
	}
	must(db.Close(), "close")
}
