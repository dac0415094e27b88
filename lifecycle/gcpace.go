package lifecycle

import (
	"os"
	"runtime/debug"
	"sync"
)

// startGCPercent is the garbage collector's pacing while Main starts a
// server: a start allocates 3 to 4 MB (the go-sdk building the tools'
// schemas, go-git reading a pack index, recovery parsing the config), and
// Go's first collection comes at a 4 MB heap, so with the default pacing
// it falls inside the start on a home with some history, before the first
// answer, and costs that answer 1.5 to 2.5 ms on two busy cores (measured:
// BENCHMARKS.md, issue 13). A collection does run: a start leaves a few MB
// of garbage, which the first collection after the start frees.
const startGCPercent = 400

// paceStartGC sets the garbage collector's pacing for the start of the
// process, unless GOGC is set (the person running it chose), and returns
// the function that puts back the pacing the process had, at once or at the
// latest when Main returns. Main, not Run, does it: the pacing is the
// process's, and a program that calls Run owns its own.
func paceStartGC() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(startGCPercent)
	return sync.OnceFunc(func() { debug.SetGCPercent(prev) })
}

// startDone ends the start's pacing (paceStartGC): the writer's start is
// complete once its state file says ready; a writer that serves HTTP ends
// it before serving, since the HTTP transport's heap floor (mcpserve) must
// find the process's own pacing; and a process that attaches has no start
// worth it.
func (h *Harness) startDone() {
	if h.started != nil {
		h.started()
	}
}
