package statefile_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mcpkeep/mcpkeep/statefile"
)

// BenchmarkRead reads one state file from many goroutines.
func BenchmarkRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), statefile.FileName)
	s := newState(b, "bench", "/h")
	if err := statefile.Write(path, &s); err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := statefile.Read(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRegister registers from many goroutines at once: every call is
// a locked read-modify-write with a durable replace.
func BenchmarkRegister(b *testing.B) {
	reg := statefile.NewRegistry(filepath.Join(b.TempDir(), "servers.json"))
	s := newState(b, "bench", "/h")
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("g%d", n.Add(1))
		for pb.Next() {
			if err := reg.Register(id, s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
