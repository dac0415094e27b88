package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// healthLoop checks, every HealthInterval after the first check Run made,
// that the lock is still ours, the state file is there and ours (rewriting
// it if not), and the home is writable; it records the result in the state
// file.
func (h *Harness) healthLoop(ctx context.Context, lock *HomeLock, statePath string, update func(func(*statefile.State)) error) {
	t := time.NewTicker(h.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		health := h.check(lock, statePath)
		if !health.OK {
			h.log.Error("health check failed", "problems", health.Problems)
		}
		if err := update(func(s *statefile.State) {
			s.Health = &health
			if s.HTTP != nil { // a copy: snapshots share the old one
				counted := *s.HTTP
				counted.Sessions, counted.Connections = h.httpStats.Sessions(), h.httpStats.Connections()
				s.HTTP = &counted
			}
		}); err != nil {
			h.log.Error("health check: could not write the state file", "path", statePath, "err", err)
		}
	}
}

// check checks the lock, the state file at statePath, and that the home
// and the directories an update writes into are writable. statePath ""
// is the first check, which runs just before the state file is first
// written: it skips the state file, and the probe file in the home too,
// since that write is a probe of its own, one whose failure stops Run.
// It writes nothing in config/: a probe file there could be committed by
// an update running at the same time.
func (h *Harness) check(lock *HomeLock, statePath string) statefile.Health {
	health := statefile.Health{OK: true, CheckedAt: time.Now().UTC().Truncate(time.Second)}
	fail := func(format string, args ...any) {
		health.OK = false
		health.Problems = append(health.Problems, fmt.Sprintf(format, args...))
	}
	if err := lock.Check(); err != nil {
		fail("lock: %v", err)
	}
	if statePath != "" {
		s, err := statefile.Read(statePath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fail("state file %s was deleted; rewritten", statePath)
		case err != nil:
			fail("state file: %v; rewritten", err)
		case !s.Ours():
			fail("state file %s names pid %d, not this process; rewritten", statePath, s.PID)
		}
	}
	home := h.opts.Home
	if statePath != "" {
		probe, err := os.CreateTemp(home, healthProbe+"*")
		if err != nil {
			fail("home %s is not writable: %v%s", home, err, remedyClause(err, home))
		} else {
			probe.Close()
			os.Remove(probe.Name())
		}
	}
	for _, d := range []string{bootstrap.ConfigDir, bootstrap.CheckpointsDir} {
		dir := filepath.Join(home, d)
		if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			fail("%s is not writable (%v): changes cannot be saved%s", dir, err, remedyClause(err, home))
		}
	}
	return health
}

// remedyClause is "; " and what to do about err, or "".
func remedyClause(err error, home string) string {
	if r := remedy(err, home); r != "" {
		return "; " + r
	}
	return ""
}

// healthProbe prefixes the name of the file the health check creates and
// removes to see that the home is writable.
const healthProbe = ".health-"

// healthBody is what GET /healthz returns: no token, no paths. Two times
// say what each figure is as of: ok and checked_at are the last health
// check's (ok is true, with no checked_at, before the first), up to
// HealthInterval old; live_at is when the body was made, and the rest
// (status, the HTTP sessions and connections, role, active, term) is as
// of then. The state file's copies of the HTTP counts are as of
// checked_at instead.
func healthBody(s statefile.State, stats *mcpserve.Stats) any {
	body := map[string]any{"ok": true, "name": s.Name, "version": s.Version, "status": s.Status,
		"live_at": time.Now().UTC().Truncate(time.Millisecond),
		"http":    map[string]int{"sessions": stats.Sessions(), "connections": stats.Connections()}}
	if s.Health != nil {
		body["ok"] = s.Health.OK
		body["checked_at"] = s.Health.CheckedAt
	}
	if c := s.Cluster; c != nil {
		body["role"] = c.Role
		if c.Active != "" {
			body["active"] = c.Active
		}
		if c.Term != 0 {
			body["term"] = c.Term
		}
	}
	return body
}
