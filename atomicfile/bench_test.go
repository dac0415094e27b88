package atomicfile_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

var kib = bytes.Repeat([]byte("x"), 1024)

// BenchmarkWriteFile replaces a 1 KiB file durably.
func BenchmarkWriteFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "f")
	for b.Loop() {
		if err := atomicfile.WriteFile(path, kib, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawFloor is the least a durable replace can do, with plain os
// calls: create a temp file in the same directory, write, fsync, close,
// rename, fsync the directory. WriteFile's overhead is measured against it.
// It also reports what three of its steps take on this disk, the costs
// every durable write pays: creating the file (create-ns/op), fsyncing it
// (fsync-ns/op) and fsyncing the directory (dirsync-ns/op).
func BenchmarkRawFloor(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "f")
	var create, fsync, dirsync time.Duration
	i := 0
	for b.Loop() {
		i++
		c, f, d := rawReplace(b, dir, path, i)
		create += c
		fsync += f
		dirsync += d
	}
	b.ReportMetric(float64(create.Nanoseconds())/float64(b.N), "create-ns/op")
	b.ReportMetric(float64(fsync.Nanoseconds())/float64(b.N), "fsync-ns/op")
	b.ReportMetric(float64(dirsync.Nanoseconds())/float64(b.N), "dirsync-ns/op")
}

// BenchmarkRawTail times RawFloor's replace one by one and reports the
// median, the 99th percentile and the slowest: the disk's own tail, which
// no durable change can be faster than. Issue 20 asks the slowest of
// 5,000 changes to be at most 10x their median (slow-10x counts the
// replaces over 10x this run's median).
//
//	go test -run '^$' -bench RawTail -benchtime 5000x -count 5 ./atomicfile
func BenchmarkRawTail(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "f")
	took := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		rawReplace(b, dir, path, i)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	p50, last := took[len(took)/2], took[len(took)-1]
	slow := 0
	for _, t := range took {
		if t > 10*p50 {
			slow++
		}
	}
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(last.Nanoseconds()), "max-ns")
	b.ReportMetric(float64(last)/float64(p50), "max/p50")
	b.ReportMetric(float64(slow), "slow-10x")
}

// rawReplace replaces path, in dir, with kib durably by plain os calls,
// its temporary file numbered i, and returns what creating the file,
// fsyncing it and fsyncing the directory took.
func rawReplace(b *testing.B, dir, path string, i int) (create, fsync, dirsync time.Duration) {
	tmp := filepath.Join(dir, ".f"+strconv.Itoa(i))
	start := time.Now()
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	create = time.Since(start)
	if _, err := f.Write(kib); err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	fsync = time.Since(start)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	start = time.Now()
	if err := d.Sync(); err != nil {
		b.Fatal(err)
	}
	return create, fsync, time.Since(start)
}

// BenchmarkThreeFiles replaces three 1 KiB files durably, one WriteFile
// each (impl=WriteFile) and in one WriteFiles call (impl=WriteFiles).
func BenchmarkThreeFiles(b *testing.B) {
	b.Run("impl=WriteFile", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			for _, name := range []string{"a", "b", "c"} {
				if err := atomicfile.WriteFile(filepath.Join(dir, name), kib, 0o600); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=WriteFiles", func(b *testing.B) {
		dir := b.TempDir()
		files := []atomicfile.File{
			{Path: filepath.Join(dir, "a"), Data: kib, Perm: 0o600},
			{Path: filepath.Join(dir, "b"), Data: kib, Perm: 0o600},
			{Path: filepath.Join(dir, "c"), Data: kib, Perm: 0o600},
		}
		for b.Loop() {
			if err := atomicfile.WriteFiles(files...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCacheRead reads a persona-sized YAML file one directory below
// a Reader's Root, as a tool reads config on each call: decoded by
// ReadYAMLStrict (impl=ReadYAMLStrict); through a Cache, the file's last
// change older than the settle time (impl=Cache); and through a Cache,
// the file changed just before (impl=Cache-recent: read again and
// compared, not decoded).
//
//	go test -run '^$' -bench CacheRead -count 6 ./atomicfile
func BenchmarkCacheRead(b *testing.B) {
	root := b.TempDir()
	path := filepath.Join(root, "personas", "default.yaml")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		b.Fatal(err)
	}
	data := []byte("name: default\nprefs:\n  tone: neutral\n  verbosity: normal\n  language: en\n")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	r := atomicfile.Reader{Root: root}
	b.Run("impl=ReadYAMLStrict", func(b *testing.B) {
		for b.Loop() {
			var p person
			if err := r.ReadYAMLStrict(path, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, impl := range []string{"Cache", "Cache-recent"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var decodes int
			c := personCache(root, &decodes)
			if impl == "Cache" {
				later(c)
			}
			for b.Loop() {
				if _, err := c.Read(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
