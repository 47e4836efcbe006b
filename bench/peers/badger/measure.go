// Measurement for the Badger peer, mirroring crates/wisckey-cli/src/bench/{iostat,histogram,
// live}.rs and bench/peers/bench_io.h, printing the same lines: device counters
// (/sys/dev/block/M:m/stat sectors read/written), process counters (/proc/self/io), getrusage
// CPU time, allocated DB size, the live-key bitmap (space amplification) and a latency
// histogram keeping every sample (exact nearest-rank percentiles, integer rank
// ceil(count*p_in_100000ths/100000)). liveKeys is atomic; a latencies belongs to one worker
// and is merged after the workers finished.
package main

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

type device struct{ name, statPath string }

type ioSample struct {
	hasDevice, hasProcess bool
	deviceBytes, process  uint64 // written
	deviceRead, procRead  uint64
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
				r, err1 := strconv.ParseUint(f[2], 10, 64)
				w, err2 := strconv.ParseUint(f[6], 10, 64)
				if err1 == nil && err2 == nil {
					s.hasDevice, s.deviceRead, s.deviceBytes = true, r*512, w*512
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
			case "read_bytes:":
				s.procRead = v
			}
		}
		if written > cancelled {
			s.process = written - cancelled
		}
	}
	return s
}

// cpuSeconds: user + system CPU of every thread of this process; negative if unreadable.
func cpuSeconds() float64 {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return -1
	}
	secs := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return secs(u.Utime) + secs(u.Stime)
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

type spanFacts struct {
	userWritten, userRead uint64
	hasLive               bool
	liveBytes             uint64
	cpu, wall             float64
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

func printAmpLines(d *device, b, a ioSample, f spanFacts, db string) {
	dbBytes := dirSizeOnDisk(db)
	var devPart, procPart string
	if d != nil && b.hasDevice && a.hasDevice {
		w := sub(a.deviceBytes, b.deviceBytes)
		devPart = fmt.Sprintf("wa=%s (device %s wrote %.1f MiB / user %.1f MiB)", ratio(w, f.userWritten), d.name, mib(w), mib(f.userWritten))
	} else {
		devPart = fmt.Sprintf("wa=n/a (no readable block device counter; user %.1f MiB)", mib(f.userWritten))
	}
	if b.hasProcess && a.hasProcess {
		w := sub(a.process, b.process)
		procPart = fmt.Sprintf("wa_process=%s (process wrote %.1f MiB)", ratio(w, f.userWritten), mib(w))
	} else {
		procPart = "wa_process=n/a (/proc/self/io unreadable)"
	}
	fmt.Printf("%-12s   %s %s db_size=%.1f MiB\n", "", devPart, procPart, mib(dbBytes))
	if d != nil && b.hasDevice && a.hasDevice {
		r := sub(a.deviceRead, b.deviceRead)
		devPart = fmt.Sprintf("ra=%s (device %s read %.1f MiB / user %.1f MiB)", ratio(r, f.userRead), d.name, mib(r), mib(f.userRead))
	} else {
		devPart = fmt.Sprintf("ra=n/a (no readable block device counter; user %.1f MiB)", mib(f.userRead))
	}
	if b.hasProcess && a.hasProcess {
		r := sub(a.procRead, b.procRead)
		procPart = fmt.Sprintf("ra_process=%s (process read %.1f MiB)", ratio(r, f.userRead), mib(r))
	} else {
		procPart = "ra_process=n/a (/proc/self/io unreadable)"
	}
	space := "space_amp=n/a (live bytes unknown: existing db)"
	if f.hasLive {
		space = fmt.Sprintf("space_amp=%s (db %.1f MiB / live %.1f MiB)", ratio(dbBytes, f.liveBytes), mib(dbBytes), mib(f.liveBytes))
	}
	cpu := "cpu=n/a"
	if f.cpu >= 0 && f.wall > 0 {
		cpu = fmt.Sprintf("cpu=%.0f%% (user+sys %.2f s / wall %.2f s)", f.cpu/f.wall*100, f.cpu, f.wall)
	}
	fmt.Printf("%-12s   %s %s %s %s\n", "", devPart, procPart, space, cpu)
}

// liveKeys: one bit per key index, set by puts and cleared by deletes.
type liveKeys struct {
	words []uint64
	known bool
}

func newLiveKeys(num uint64, known bool) *liveKeys {
	return &liveKeys{words: make([]uint64, (num+63)/64), known: known}
}

func (l *liveKeys) reset() {
	for i := range l.words {
		atomic.StoreUint64(&l.words[i], 0)
	}
	l.known = true
}

func (l *liveKeys) insert(i uint64) {
	if i/64 < uint64(len(l.words)) {
		atomic.OrUint64(&l.words[i/64], 1<<(i%64))
	}
}

func (l *liveKeys) remove(i uint64) {
	if i/64 < uint64(len(l.words)) {
		atomic.AndUint64(&l.words[i/64], ^(uint64(1) << (i % 64)))
	}
}

func (l *liveKeys) count() uint64 {
	var n uint64
	for i := range l.words {
		n += uint64(bits.OnesCount64(atomic.LoadUint64(&l.words[i])))
	}
	return n
}

type latencies struct{ samples []uint64 }

func (l *latencies) merge(o *latencies) { l.samples = append(l.samples, o.samples...) }

func (l *latencies) at(per100k uint64) float64 {
	n := uint64(len(l.samples))
	rank := (n*per100k + 99999) / 100000
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return float64(l.samples[rank-1]) / 1000.0
}

func (l *latencies) sort() {
	sort.Slice(l.samples, func(i, j int) bool { return l.samples[i] < l.samples[j] })
}

func (l *latencies) print() {
	fmt.Println("Microseconds per op:")
	if len(l.samples) == 0 {
		fmt.Println("Count: 0")
		return
	}
	sort.Slice(l.samples, func(i, j int) bool { return l.samples[i] < l.samples[j] })
	var sum, sq float64
	for _, s := range l.samples {
		sum += float64(s)
		sq += float64(s) * float64(s)
	}
	n := float64(len(l.samples))
	mean := sum / n
	variance := math.Max(sq/n-mean*mean, 0)
	fmt.Printf("Count: %d  Average: %.4f  StdDev: %.2f\n", len(l.samples), mean/1000, math.Sqrt(variance)/1000)
	fmt.Printf("Min: %.3f  Median: %.3f  Max: %.3f\n", float64(l.samples[0])/1000, l.at(50000), float64(l.samples[len(l.samples)-1])/1000)
	fmt.Printf("Percentiles: P50: %.2f P75: %.2f P99: %.2f P99.9: %.2f P99.99: %.2f\n", l.at(50000), l.at(75000), l.at(99000), l.at(99900), l.at(99990))
}
