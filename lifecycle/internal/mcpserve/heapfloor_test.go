package mcpserve

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 200},         // the runtime's floor, 4 MiB at 100, scaled to 8
		{1 * mib, 200},   // 4 MiB * 2 = 8 MiB; 1 MiB * 3 is less
		{3 * mib, 166},   // 3 MiB * 2.66 = 8 MiB
		{4 * mib, 100},   // 4 MiB * 2 reaches the floor already
		{100 * mib, 100}, // a large heap gets the runtime's own goal
	} {
		got := percentFor(8*mib, tc.live)
		assert.Equal(t, tc.want, got, "live %d", tc.live)
		goal := max(uint64(got)*runtimeMinHeap/100, tc.live*uint64(100+got)/100)
		if tc.live < 4*mib {
			assert.InDelta(t, 8*mib, goal, mib/8, "goal for live %d", tc.live)
		}
	}
}

// gcPercent returns the GC percentage in force.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestKeepHeapFloor(t *testing.T) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Setenv("GOGC", v) // restored at the end
		os.Unsetenv("GOGC")
	}
	require.Equal(t, 100, gcPercent())
	stop := keepHeapFloor(8 << 20)
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() <= 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Greater(t, gcPercent(), 100, "the floor never raised the GC percentage of a small heap")
	stop()
	runtime.GC()
	assert.Equal(t, 100, gcPercent(), "stop did not give the runtime its own goal back")
}

func TestKeepHeapFloorLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	stop := keepHeapFloor(8 << 20)
	defer stop()
	runtime.GC()
	runtime.GC()
	assert.Equal(t, 100, gcPercent())
}
