package portmgr_test

import (
	"testing"

	"github.com/mcpkeep/mcpkeep/portmgr"
)

// BenchmarkListen binds and closes a listener for a key.
func BenchmarkListen(b *testing.B) {
	key := b.TempDir()
	for b.Loop() {
		ln, err := portmgr.Listen(b.Context(), portmgr.Options{Key: key})
		if err != nil {
			b.Fatal(err)
		}
		ln.Close()
	}
}
