package barrier_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mcpkeep/mcpkeep/internal/barrier"
)

// BenchmarkChangeShapes measures, on the disk of the temporary directory
// and with no other work, the two shapes gitstore gives a change's
// barriers (DESIGN.md, issue 20): a lone change (its journal record and
// temporary file fsynced at once, the rename, the directory fsynced:
// lone-ns/change) and, under load, one barrier that is the second of a
// batch and the first of the next (the record of a batch of 4, its
// temporary file and the directory of the last batch's rename, fsynced at
// once: merged-ns/barrier). The two alternate in blocks of 50.
//
// merged/lone is what the disk charges a loaded barrier against a lone
// change's two: k clients can reach at most (changes a loaded barrier
// serves) / merged/lone times one client's rate, with their processor
// time free. bound4 is that bound at 4 changes a barrier.
//
//	go test -run '^$' -bench ChangeShapes -benchtime 2000x -count 5 ./internal/barrier
func BenchmarkChangeShapes(b *testing.B) {
	dir := b.TempDir()
	journal, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer journal.Close()
	target := filepath.Join(dir, "shared.yaml")
	record := make([]byte, 600)          // a one-commit record of a small YAML change
	batch := make([]byte, 4*len(record)) // a record of 4 such commits
	data := make([]byte, 300)
	n := 0
	temp := func() (*os.File, string) {
		n++
		p := filepath.Join(dir, ".shared.yaml.tmp"+strconv.Itoa(n))
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		return f, p
	}
	var lone, merged time.Duration
	var lones, mergeds int
	renamed := false // a merged barrier's rename waits for its directory's fsync
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if (i/50)%2 == 0 {
			if renamed { // end the merged run: its last rename's barrier
				if err := barrier.Sync(barrier.DirOp(dir)); err != nil {
					b.Fatal(err)
				}
				renamed = false
				start = time.Now()
			}
			if _, err := journal.Write(record); err != nil {
				b.Fatal(err)
			}
			f, p := temp()
			if err := barrier.Sync(barrier.FileOp(journal), barrier.FileOp(f)); err != nil {
				b.Fatal(err)
			}
			f.Close()
			if err := os.Rename(p, target); err != nil {
				b.Fatal(err)
			}
			if err := barrier.Sync(barrier.DirOp(dir)); err != nil {
				b.Fatal(err)
			}
			lone += time.Since(start)
			lones++
			continue
		}
		if _, err := journal.Write(batch); err != nil {
			b.Fatal(err)
		}
		f, p := temp()
		ops := []barrier.Op{barrier.FileOp(journal), barrier.FileOp(f)}
		if renamed {
			ops = append(ops, barrier.DirOp(dir))
		}
		if err := barrier.Sync(ops...); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if err := os.Rename(p, target); err != nil {
			b.Fatal(err)
		}
		renamed = true
		merged += time.Since(start)
		mergeds++
	}
	if lones == 0 || mergeds == 0 {
		return
	}
	l := float64(lone.Nanoseconds()) / float64(lones)
	m := float64(merged.Nanoseconds()) / float64(mergeds)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(l, "lone-ns/change")
	b.ReportMetric(m, "merged-ns/barrier")
	b.ReportMetric(m/l, "merged/lone")
	b.ReportMetric(4*l/m, "bound4")
}
