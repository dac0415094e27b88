// Package diskfloor times the least a durable file replace can do with
// plain os calls, the floor that the benchmarks of the change path
// (lifecycle's BenchmarkUpdate, helios's BenchmarkStdioCalls) set their
// figures beside, measured in the same run so that both see the same
// disk. atomicfile's BenchmarkRawFloor times the same steps one by one.
package diskfloor

import (
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// kib is what Replace writes: 1 KiB, a small config file.
var kib = make([]byte, 1024)

// Replace durably replaces dir/f with 1 KiB and returns how long it took:
// create a temporary file in dir (named after i, which the caller makes
// unique), write, fsync, close, rename it to f, fsync dir.
func Replace(dir string, i int) (time.Duration, error) {
	start := time.Now()
	tmp := filepath.Join(dir, ".f"+strconv.Itoa(i))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	_, err = f.Write(kib)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, "f"))
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
