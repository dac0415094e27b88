package lifecycle

import (
	"fmt"
	"testing"
)

// TestGoid: goid reads the calling goroutine's id, another goroutine's
// is another.
func TestGoid(t *testing.T) {
	mine := goid()
	if mine == 0 {
		t.Fatal("goid read 0")
	}
	other := make(chan uint64)
	go func() { other <- goid() }()
	if o := <-other; o == mine || o == 0 {
		t.Fatalf("another goroutine's id is %d, this one's %d", o, mine)
	}
}

// BenchmarkGoid times reading the goroutine's id at stack depths a
// change is made from: why a process with one Env does not read it on
// every Update (envs).
//
//	go test -run '^$' -bench Goid ./lifecycle
func BenchmarkGoid(b *testing.B) {
	for _, depth := range []int{0, 10, 40} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			for b.Loop() {
				atDepth(depth)
			}
		})
	}
}

//go:noinline
func atDepth(n int) uint64 {
	if n == 0 {
		return goid()
	}
	return atDepth(n-1) + 1
}
