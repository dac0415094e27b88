package atomicfile_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkRawExchange is RawTail's replace done another way, which
// mcpkeep does not use, to measure what it would give: a spare file, made
// once, is overwritten in place, fsynced, and exchanged with the target
// (renameat2 RENAME_EXCHANGE), then the directory is fsynced. No file is
// created and no inode is freed, so the fsync allocates nothing and the
// exchange has no blocks to release (on a disk mounted with discard, a
// rename that replaces a file waits for the replaced file's blocks to be
// discarded). The spare then holds the replaced contents, for the next
// replace to overwrite: a reader still holding the replaced file open
// would see it rewritten under it, which is why atomicfile creates a new
// file for every replace (DESIGN.md, issue 20, "A replace that reuses its
// file"). Compare with RawTail:
//
//	go test -run '^$' -bench 'RawTail|RawExchange' -benchtime 5000x -count 3 ./atomicfile
func BenchmarkRawExchange(b *testing.B) {
	dir := b.TempDir()
	path, spare := filepath.Join(dir, "f"), filepath.Join(dir, ".f.spare")
	for _, p := range []string{path, spare} {
		if err := os.WriteFile(p, kib, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	data := slices.Clone(kib)
	took := make([]time.Duration, 0, b.N)
	var exchange time.Duration
	i := 0
	for b.Loop() {
		i++
		data[0] = byte(i)
		start := time.Now()
		f, err := os.OpenFile(spare, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		x := time.Now()
		if err := unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE); err != nil {
			b.Fatal(err)
		}
		exchange += time.Since(x)
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	p50, last := took[len(took)/2], took[len(took)-1]
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(last.Nanoseconds()), "max-ns")
	b.ReportMetric(float64(exchange.Nanoseconds())/float64(b.N), "exchange-ns/op")
}
