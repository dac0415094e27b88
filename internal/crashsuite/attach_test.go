package crashsuite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// The attach workload runs two helios processes on one home, each with its
// own client, as two MCP hosts would: W, started first, is the writer; F,
// started once W's state file names it, attaches to it. A failpoint of
// attach or handover is armed in the one that reaches it; a random kill
// kills W or F. The other is a survivor: its client must keep working, and
// once its client has gone it must exit, cleanly, by itself.

// armedInWriter reports whether failpoint name is reached by the writer
// (else by the attached process).
func armedInWriter(name string) bool {
	switch name {
	case "attach.writer-after-hello", "attach.writer-before-goodbye", "lifecycle.handover-before-drain":
		return true
	}
	return false
}

// isAttachPoint reports whether failpoint name needs the attach workload.
func isAttachPoint(name string) bool {
	switch name {
	case "lifecycle.takeover-after-lock", "lifecycle.handover-before-drain":
		return true
	}
	return strings.HasPrefix(name, "attach.")
}

// member is one of the two processes of the attach workload.
type member struct {
	name string // "writer" or "attached"
	p    *crashtest.Process
	c    *rpc
	gone bool // its client saw it go
}

// attachment is the attach workload of the iteration in progress.
type attachment struct {
	w, f   *member
	victim *member // the process with the failpoint, or the one a random kill hits
}

func (a *attachment) survivor() *member {
	if a.victim == a.w {
		return a.f
	}
	return a.w
}

// startAttached starts W, waits until it is the writer, and starts F; the
// failpoints spec is armed in victim ("writer" or "attached"). It returns
// the victim's process, for crashtest to watch.
func (s *suite) startAttached(ctx context.Context, spec, victim string) (*crashtest.Process, error) {
	h := s.cur.home
	a := &attachment{}
	s.cur.att = a
	start := func(name, fps string) (*member, error) {
		p, err := crashtest.Start(ctx, s.cmd(h, fps))
		if err != nil {
			return nil, err
		}
		return &member{name: name, p: p, c: newRPC(p.Stdin(), p.Stdout())}, nil
	}
	specFor := func(name string) string {
		if name == victim {
			return spec
		}
		return ""
	}
	var err error
	if a.w, err = start("writer", specFor("writer")); err != nil {
		return nil, err
	}
	if err := a.w.c.initialize(); err != nil {
		return nil, fmt.Errorf("the writer: initialize: %w; stderr:\n%s", err, a.w.p.Stderr())
	}
	if err := awaitAnnounced(h, a.w.p); err != nil {
		return nil, fmt.Errorf("the writer: %w; stderr:\n%s", err, a.w.p.Stderr())
	}
	if a.f, err = start("attached", specFor("attached")); err != nil {
		return nil, err
	}
	a.victim = a.w
	if victim == "attached" {
		a.victim = a.f
	}
	return a.victim.p, nil
}

// update makes one update_preference call through m and records it in h.
// An answer saying the outcome is unknown leaves the update pending: it
// may or may not have landed. A process that went is marked gone; when it
// was the attached one, the writer may still commit the update it took
// (an orphan: the writer reads its socket and its own client's stdin in
// their own goroutines, so a change the suite sends after it saw the
// process go can be committed first).
func (m *member) update(h *home, it *crashtest.Iteration, tag string) (acked bool, err error) {
	if m.gone {
		return false, nil
	}
	u := h.newUpdate(it.Schedule, tag)
	h.sent(u)
	r, err := m.c.call("update_preference", u)
	switch {
	case errors.Is(err, errGone):
		m.gone = true
		if m.name == "attached" {
			h.orphaned(u)
		}
		return false, nil
	case errors.Is(err, errOutcomeUnknown):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("through the %s process: %w", m.name, err)
	}
	return true, h.acked(u, r)
}

// driveAttached is the failpoint workload: F's client initializes, both
// clients update in turn, W's client goes (W hands over to F), F's client
// updates on, and goes. Whichever process the failpoint kills, the other's
// client must be answered: after the handover F must take every update.
func (s *suite) driveAttached(it *crashtest.Iteration, tag string) error {
	a, h := s.cur.att, s.cur.home
	if err := a.f.c.initialize(); errors.Is(err, errGone) {
		a.f.gone = true
	} else if err != nil {
		return fmt.Errorf("the attached process: %w", err)
	}
	for range 2 {
		for _, m := range []*member{a.w, a.f} {
			if _, err := m.update(h, it, tag); err != nil {
				return err
			}
		}
	}
	a.w.p.Stdin().Close()
	if err := a.w.c.drain(); err != nil {
		return fmt.Errorf("the writer: %w", err)
	}
	a.w.gone = true
	return s.keepsWorking(a.f, it, tag)
}

// keepsWorking checks that m's client is answered after the other process
// went: of three updates, the first may be in flight across the handover
// (its outcome unknown), the others must be acknowledged. A member that is
// the victim, or whose process went, is let off.
func (s *suite) keepsWorking(m *member, it *crashtest.Iteration, tag string) error {
	a, h := s.cur.att, s.cur.home
	for i := range 3 {
		acked, err := m.update(h, it, tag)
		if err != nil {
			return err
		}
		if m.gone {
			if m == a.victim {
				return nil
			}
			return fmt.Errorf("the %s process went away under its client after the %s went; stderr:\n%s", m.name, a.victim.name, m.p.Stderr())
		}
		if !acked && i > 0 {
			return fmt.Errorf("the %s process's client was not answered after the handover (update %d of 3)", m.name, i+1)
		}
	}
	return nil
}

// driveAttachedRandom is the random-kill workload: both clients update in
// turn until the victim goes, then the survivor's client must keep
// working.
func (s *suite) driveAttachedRandom(ctx context.Context, it *crashtest.Iteration, tag string) error {
	a, h := s.cur.att, s.cur.home
	if err := a.f.c.initialize(); errors.Is(err, errGone) {
		a.f.gone = true
	} else if err != nil {
		return fmt.Errorf("the attached process: %w", err)
	}
	s.cur.serving = true
	for !a.victim.gone {
		select {
		case <-a.victim.p.Done():
			a.victim.gone = true
			continue
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		for _, m := range []*member{a.w, a.f} {
			if _, err := m.update(h, it, tag); err != nil {
				return err
			}
		}
		if a.survivor().gone {
			return fmt.Errorf("the %s process went away while only the %s was killed; stderr:\n%s",
				a.survivor().name, a.victim.name, a.survivor().p.Stderr())
		}
	}
	return s.keepsWorking(a.survivor(), it, tag)
}

// stopSurvivor ends the survivor after a crash of the attach workload: its
// client goes (stdin closes) and it must exit by itself, with status 0,
// within a minute, a writer after handing over to nobody.
func (s *suite) stopSurvivor() error {
	a := s.cur.att
	if a == nil {
		return nil
	}
	s.cur.att = nil
	m := a.survivor()
	m.p.Stdin().Close()
	go m.c.drain()
	select {
	case <-m.p.Done():
	case <-time.After(time.Minute):
		m.p.Kill()
		m.p.Wait()
		return fmt.Errorf("the %s process did not exit within a minute of its client going; stderr:\n%s", m.name, m.p.Stderr())
	}
	if err := m.p.Wait(); err != nil {
		return fmt.Errorf("the %s process did not exit cleanly once its client went: %w; stderr:\n%s", m.name, err, m.p.Stderr())
	}
	return nil
}
