package barrier_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/internal/barrier"
)

// Two files made durable in one barrier, then their directory in a
// second, counted.
func ExampleSync() {
	dir, _ := os.MkdirTemp("", "barrier")
	defer os.RemoveAll(dir)
	a, _ := os.Create(filepath.Join(dir, "a"))
	b, _ := os.Create(filepath.Join(dir, "b"))
	defer a.Close()
	defer b.Close()

	var c barrier.Counter
	defer barrier.SetCounter(barrier.SetCounter(&c))
	if err := barrier.Sync(barrier.FileOp(a), barrier.FileOp(b)); err != nil {
		fmt.Println(err)
	}
	if err := barrier.Sync(barrier.DirOp(dir)); err != nil {
		fmt.Println(err)
	}
	fmt.Println(c.Barriers(), "barriers,", c.Fsyncs(), "fsyncs")
	// Output: 2 barriers, 3 fsyncs
}
