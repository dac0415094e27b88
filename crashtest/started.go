package crashtest

import (
	"context"
	"slices"
	"sync"
)

// started records the processes Start starts with the context Run passes
// to one iteration's functions, so that Run counts a failpoint that kills
// any of them, not only the Process Plan.Start returns: a Drive that
// starts a second process (PhaseAttach) need not hand it back.
type started struct {
	mu    sync.Mutex
	procs []*Process
}

type startedKey struct{}

// withStarted returns ctx, recording in s the processes Start starts with
// it or a context derived from it.
func withStarted(ctx context.Context, s *started) context.Context {
	return context.WithValue(ctx, startedKey{}, s)
}

// record adds p to the iteration's processes, when ctx is an iteration's.
func record(ctx context.Context, p *Process) {
	s, ok := ctx.Value(startedKey{}).(*started)
	if !ok {
		return
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
}

// end kills every recorded process still running and waits until each
// has been reaped. A process that killed itself before stays counted as
// such (see Process.signal).
func (s *started) end() {
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	for _, p := range procs {
		_ = p.Kill()
	}
}

// fired reports whether failpoint name killed a recorded process it was
// armed in to kill. Call it after end.
func (s *started) fired(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.procs, func(p *Process) bool {
		a, ok := p.armed[name]
		return ok && a.Kind == "kill" && p.Exited() && p.killedBySelf()
	})
}
