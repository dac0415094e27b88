package gitstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// looseSizes are the numbers of loose objects the benchmarks below work
// among: helios commits into up to DefaultPackThreshold of them between
// two packs.
var looseSizes = []int{100, 1000, 2000}

// looseRepo returns an open store in a new repository holding about loose
// unpacked objects, and a func that commits one changed file in it.
func looseRepo(b *testing.B, loose int) (string, *gitstore.Store, func()) {
	b.Helper()
	dir := b.TempDir()
	s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	n := 0
	commit := func() {
		n++
		if err := os.WriteFile(filepath.Join(dir, "a.yaml"), fmt.Appendf(nil, "n: %d\n", n), 0o600); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Commit(fmt.Sprint(n)); err != nil {
			b.Fatal(err)
		}
	}
	for range loose / 3 { // a blob, a tree and a commit each
		commit()
	}
	return dir, s, commit
}

// BenchmarkCommitAmongLooseObjects commits one changed file among loose
// objects. The cost must not grow with them.
func BenchmarkCommitAmongLooseObjects(b *testing.B) {
	for _, loose := range looseSizes {
		b.Run(fmt.Sprintf("loose=%d", loose), func(b *testing.B) {
			_, _, commit := looseRepo(b, loose)
			for b.Loop() {
				commit()
			}
		})
	}
}

// BenchmarkOpenAmongLooseObjects opens (and closes) a repository holding
// loose objects, as the holder of the home lock does twice at every start
// of a server (recovery, then the harness). The cost must not grow with
// them.
func BenchmarkOpenAmongLooseObjects(b *testing.B) {
	for _, loose := range looseSizes {
		b.Run(fmt.Sprintf("loose=%d", loose), func(b *testing.B) {
			dir, _, _ := looseRepo(b, loose)
			for b.Loop() {
				s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}
