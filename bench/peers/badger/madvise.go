// madvise.go: --madv_random. Badger v4 reads its tables and value-log files through mmap and
// offers no switch; under a memory limit every cold read then faults in the device's
// read-ahead window (8 MiB on the benchmark machine) and the page cache thrashes. With
// --madv_random a goroutine scans /proc/self/maps every 50 ms and applies
// madvise(MADV_RANDOM) to each mapping of a file inside the database directory, so faults
// read single pages. Mappings created between two scans fault with read-ahead until the next
// scan; read phases open all their files at DB open, so they are covered from the start.
package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const adviceRandom = 1 // MADV_RANDOM from <sys/mman.h>

// adviseRandomForever starts the scanner; it stops when the process exits.
func adviseRandomForever(dbDir string) {
	dir, err := filepath.Abs(dbDir)
	must(err, "madvise: resolve db dir")
	advised := map[uint64]bool{}
	adviseRandomOnce(dir, advised)
	go func() {
		for {
			time.Sleep(50 * time.Millisecond)
			adviseRandomOnce(dir, advised)
		}
	}()
}

// adviseRandomOnce advises every not-yet-advised mapping of a file under dir.
func adviseRandomOnce(dir string, advised map[uint64]bool) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		// "start-end perms offset dev inode path"
		fields := strings.Fields(scanner.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], dir+"/") {
			continue
		}
		bounds := strings.SplitN(fields[0], "-", 2)
		if len(bounds) != 2 {
			continue
		}
		start, err1 := strconv.ParseUint(bounds[0], 16, 64)
		end, err2 := strconv.ParseUint(bounds[1], 16, 64)
		if err1 != nil || err2 != nil || end <= start || advised[start] {
			continue
		}
		// A mapping unmapped since the scan read the file gives ENOMEM; nothing to advise then.
		_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), adviceRandom)
		if errno == 0 {
			advised[start] = true
		}
	}
}
