package mcpserve

import (
	"fmt"
	"log/slog"
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

func TestKeepHeapFloor(t *testing.T) {
	unsetGOGC(t)
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
	unsetGOGC(t)
	t.Setenv("GOGC", "100")
	stop := keepHeapFloor(8 << 20)
	defer stop()
	runtime.GC()
	runtime.GC()
	assert.Equal(t, 100, gcPercent())
}

func TestKeepHeapFloorLeavesTheProgramsPercent(t *testing.T) {
	unsetGOGC(t)

	// Set before: the floor is not kept.
	debug.SetGCPercent(50)
	stop := keepHeapFloor(8 << 20)
	runtime.GC()
	runtime.GC()
	assert.Equal(t, 50, gcPercent(), "the floor replaced a percentage the program had set")
	stop()
	assert.Equal(t, 50, gcPercent(), "stop replaced a percentage the program had set")

	// Set while it is kept: the floor ends and leaves it.
	debug.SetGCPercent(100)
	stop = keepHeapFloor(8 << 20)
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() <= 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	require.Greater(t, gcPercent(), 100, "the floor never raised the GC percentage of a small heap")
	debug.SetGCPercent(70)
	stopped := func() bool {
		floorMu.Lock()
		defer floorMu.Unlock()
		floorActive.mu.Lock()
		defer floorActive.mu.Unlock()
		return floorActive.stopped
	}
	for deadline := time.Now().Add(10 * time.Second); !stopped() && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	require.True(t, stopped(), "the floor did not see the program's percentage")
	assert.Equal(t, 70, gcPercent(), "the floor overrode a percentage the program set while it was kept")
	stop()
	assert.Equal(t, 70, gcPercent(), "stop overrode a percentage the program set while the floor was kept")
}

func TestFloorFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		peak int64
		want uint64
	}{
		{0, 8 * mib},
		{-1, 8 * mib}, // never below the base
		{8, 9 * mib},
		{64, 16 * mib},
		{192, 32 * mib},
		{100000, 32 * mib}, // capped
	} {
		assert.Equal(t, tc.want, floorFor(8*mib, tc.peak), "peak %d", tc.peak)
	}
}

func TestPostsPeak(t *testing.T) {
	postsPeak()
	for range 5 {
		postStarted()
	}
	for range 3 {
		postDone()
	}
	assert.Equal(t, int64(5), postsPeak(), "the most in progress since the last call")
	assert.Equal(t, int64(2), postsPeak(), "the next count starts from those in progress")
	postDone()
	postDone()
	assert.Equal(t, int64(2), postsPeak())
	assert.Equal(t, int64(0), postsPeak())
}

func TestKeepHeapFloorFollowsLoad(t *testing.T) {
	unsetGOGC(t)
	stop := keepHeapFloor(8 << 20)
	defer stop()
	// gcUntil collects until cond holds, or 10 s have passed.
	gcUntil := func(cond func(p int) bool) int {
		deadline := time.Now().Add(10 * time.Second)
		for !cond(gcPercent()) && time.Now().Before(deadline) {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
		return gcPercent()
	}
	idle := gcUntil(func(p int) bool { return p > 100 })
	require.Greater(t, idle, 100, "the floor never raised the GC percentage of a small heap")

	for range 64 {
		postStarted()
	}
	busy := gcUntil(func(p int) bool { return p > idle })
	assert.Greater(t, busy, idle, "64 requests in progress did not raise the floor")
	for range 64 {
		postDone()
	}
	after := gcUntil(func(p int) bool { return p < busy })
	assert.Less(t, after, busy, "the floor stayed raised after the requests ended")

	tab := newSessionTable(Limits{SessionIdleTimeout: time.Minute}, nil, func(string) {}, new(Stats), slog.New(slog.DiscardHandler))
	defer tab.close()
	for i := range 64 {
		require.True(t, tab.reserve())
		tab.add(fmt.Sprint(i), "2025-11-25")
	}
	busy = gcUntil(func(p int) bool { return p > idle })
	assert.Greater(t, busy, idle, "64 live sessions did not raise the floor")
	for i := range 64 {
		tab.drop(fmt.Sprint(i))
	}
	after = gcUntil(func(p int) bool { return p < busy })
	assert.Less(t, after, busy, "the floor stayed raised after the sessions ended")
}

// unsetGOGC unsets GOGC for the test, which keepHeapFloor would take as
// the user's choice, and puts the collector's percentage at the runtime's
// default, 100, which a GOGC set when the test binary started changed;
// both are restored at the end.
func unsetGOGC(t *testing.T) {
	t.Helper()
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Setenv("GOGC", v) // restored at the end
		os.Unsetenv("GOGC")
	}
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	require.Equal(t, 100, gcPercent())
}
