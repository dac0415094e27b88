package gitstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// BenchmarkCommitAmongLooseObjects commits one changed file in a
// repository already holding about loose unpacked objects. The cost must
// not grow with them: helios commits into up to DefaultPackThreshold loose
// objects between two packs.
func BenchmarkCommitAmongLooseObjects(b *testing.B) {
	for _, loose := range []int{100, 1000, 2000} {
		b.Run(fmt.Sprintf("loose=%d", loose), func(b *testing.B) {
			dir := b.TempDir()
			s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
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
			for b.Loop() {
				commit()
			}
		})
	}
}
