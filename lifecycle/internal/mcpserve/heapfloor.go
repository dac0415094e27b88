package mcpserve

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// heapFloor is the heap goal below which the HTTP transport does not let
// the garbage collector's goal fall while it serves, with no session live
// and no request in progress: see keepHeapFloor.
const heapFloor = 8 << 20

// floorAllowance is what each live session, and each POST in progress,
// adds to the heap floor: at 64 sessions helios's live heap is 5-7 MiB
// (the sessions' state, their connections' buffers, the calls in
// progress), past an 8 MiB floor's reach, and 16 MiB holds its goal.
const floorAllowance = 128 << 10

// maxHeapFloor caps the floor however many sessions are live and
// requests in progress.
const maxHeapFloor = 32 << 20

// liveSessions counts the live sessions of this process's HTTP servers
// (sessionTable keeps it beside its Stats).
var liveSessions atomic.Int64

// posts counts the POSTs in progress in this process's HTTP servers (an
// authenticated one, past the guard) and the most there were at once
// since the last collection: stateless clients have no session.
var posts struct{ now, peak atomic.Int64 }

// postStarted counts a POST in progress until postDone.
func postStarted() {
	n := posts.now.Add(1)
	for p := posts.peak.Load(); n > p && !posts.peak.CompareAndSwap(p, n); p = posts.peak.Load() {
	}
}

// postDone ends what postStarted counted.
func postDone() { posts.now.Add(-1) }

// postsPeak returns the most POSTs there were in progress at once since
// its last call, and starts the next count from those in progress now.
func postsPeak() int64 {
	return max(posts.peak.Swap(posts.now.Load()), 0)
}

// floorFor is the heap floor for n live sessions and requests in
// progress: base plus floorAllowance each, at most maxHeapFloor, never
// below base.
func floorFor(base uint64, n int64) uint64 {
	f := base + uint64(max(n, 0))*floorAllowance
	return max(min(f, maxHeapFloor), base)
}

// runtimeMinHeap is the Go runtime's own floor under the heap goal at
// GOGC=100; it scales with GOGC.
const runtimeMinHeap = 4 << 20

// keepHeapFloor keeps the garbage collector's heap goal at floor bytes or
// more, plus floorAllowance for each live HTTP session and for each POST
// in progress at once since the previous collection, at most
// maxHeapFloor, until stop is called, unless the GOGC environment
// variable is set or the program has set a GC percentage other than 100
// itself (debug.SetGCPercent): the user has chosen. A percentage the
// program sets while the floor is kept ends the floor, and is left as it
// was set.
//
// Why: the go-sdk allocates a 32 KiB decode buffer for each JSON message,
// about 300 KB a call, and a server whose live heap is a few MiB runs a
// collection every ten calls or so, at the runtime's 4 MiB floor. Its live
// heap swings between collections (requests in flight), and with it the
// goal, and the runtime returns the pages above each lower goal to the
// kernel only to fault them in again at the next: helios, with 2-3 MiB
// live, took three times the bare go-sdk server's page faults and a fifth
// more CPU per call (BENCHMARKS.md, issue 22). A steady floor makes the
// collections rarer and keeps the pages. The live heap grows with the
// sessions served at once, and the floor with it.
//
// What it costs: the heap may grow to the floor before a collection,
// where it would have stopped at 4 to 6 MiB; RSS is that much higher at
// most, never more: 8 MiB with a few sessions, 32 MiB whatever clients
// open. Once the live heap is above half the floor the goal is the
// runtime's own (GOGC=100): a large heap is never given more room than
// without the floor. The floor falls as sessions end (closed, expired or
// evicted) at the next collection; a burst of POSTs keeps it raised until
// the second collection after the burst has ended, since each goal counts
// the POSTs since the collection before. Until a collection the heap grows
// toward the raised goal only as fast as something allocates.
// cmd/helios's hostile-HTTP tests, which bound RSS, run with it (DESIGN.md,
// issue 22).
//
// How: after each collection (a finalizer re-armed every cycle), it sets
// the GC percentage that makes the goal the floor for the live heap the
// collection found, never below 100.
//
// The setting is the process's: servers started together share one
// floor, the first one's base, which lasts until the last one stops.
func keepHeapFloor(floor uint64) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set || floor == 0 {
		return func() {}
	}
	floorMu.Lock()
	defer floorMu.Unlock()
	if floorUsers == 0 {
		if gcPercent() != 100 {
			return func() {} // the program's own choice
		}
		floorActive = &floorKeeper{floor: floor, percent: 100, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}}
		if floorActive.adjust() {
			floorActive.arm()
		}
	}
	floorUsers++
	return sync.OnceFunc(func() {
		floorMu.Lock()
		defer floorMu.Unlock()
		if floorUsers--; floorUsers == 0 {
			floorActive.stop()
			floorActive = nil
		}
	})
}

var (
	floorMu     sync.Mutex
	floorUsers  int          // keepHeapFloor's callers that have not stopped
	floorActive *floorKeeper // while floorUsers > 0
)

// floorKeeper is keepHeapFloor's state.
type floorKeeper struct {
	floor uint64

	mu      sync.Mutex
	stopped bool
	percent int
	sample  []metrics.Sample
}

// stop gives the runtime its own goal back, unless the program has set
// a percentage of its own meanwhile, and ends the re-arming.
func (f *floorKeeper) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped && gcPercent() == f.percent {
		debug.SetGCPercent(100)
	}
	f.stopped = true
}

// gcPercent returns the GC percentage in force, without changing it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int(s[0].Value.Uint64())
}

// cycleMark is an object that dies at each collection; its finalizer
// runs after it.
type cycleMark struct {
	f *floorKeeper
	_ [16]byte // not a tiny allocation, whose finalizer may never run
}

func (f *floorKeeper) arm() {
	runtime.SetFinalizer(&cycleMark{f: f}, func(m *cycleMark) {
		if m.f.adjust() {
			m.f.arm()
		}
	})
}

// adjust sets the GC percentage for the live heap the last collection
// found; false once stopped, or once it finds a percentage it did not set
// (the program's own, which it leaves).
func (f *floorKeeper) adjust() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	var live uint64
	if f.sample[0].Value.Kind() == metrics.KindUint64 {
		live = f.sample[0].Value.Uint64()
	}
	if f.sample[1].Value.Kind() != metrics.KindUint64 || int(f.sample[1].Value.Uint64()) != f.percent {
		f.stopped = true // set by the program since the last cycle
		return false
	}
	p := percentFor(floorFor(f.floor, liveSessions.Load()+postsPeak()), live)
	if p != f.percent {
		debug.SetGCPercent(p)
		f.percent = p
	}
	return true
}

// percentFor returns the GC percentage that puts the heap goal at floor
// for a live heap of live bytes, or 100 if that goal is reached at 100.
// The goal is the larger of runtimeMinHeap*p/100 and live*(1+p/100).
func percentFor(floor, live uint64) int {
	if live >= floor/2 {
		return 100
	}
	p := floor * 100 / runtimeMinHeap
	if live > 0 {
		p = min(p, floor*100/live-100)
	}
	return int(max(p, 100))
}
