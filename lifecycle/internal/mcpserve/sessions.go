package mcpserve

import (
	"container/list"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionTable keeps the HTTP sessions of initialize-era clients: their
// negotiated protocol version, whether a request of theirs is in progress,
// and which have been idle longest. It closes a session idle for longer
// than the idle timeout, and, when the cap is reached, the one idle
// longest to make room for a new one; a session with a request or an event
// stream open is never closed by either. The go-sdk keeps the sessions
// themselves; closeFn closes one of its sessions by ID.
type sessionTable struct {
	max     int           // <= 0: no cap
	timeout time.Duration // <= 0: never expire
	closeFn func(id string)
	stats   *Stats
	log     *slog.Logger
	now     func() time.Time // how long a session has been idle is measured with it

	mu       sync.Mutex
	byID     map[string]*session
	quiet    list.List // of *session with no request in progress, least recently used first
	reserved int       // initializes in progress, counted against max
	closed   bool
}

// session is one live session.
type session struct {
	id      string
	version string // the protocol version negotiated at initialize
	busy    int    // requests and event streams in progress
	elem    *list.Element
	timer   *time.Timer
	since   time.Time // when busy last fell to 0
	gone    bool
}

// newSessionTable returns an empty table; a nil clock means time.Now.
func newSessionTable(l Limits, clock func() time.Time, closeFn func(string), stats *Stats, log *slog.Logger) *sessionTable {
	if clock == nil {
		clock = time.Now
	}
	return &sessionTable{max: l.MaxSessions, timeout: l.SessionIdleTimeout, closeFn: closeFn, stats: stats, log: log,
		now: clock, byID: make(map[string]*session)}
}

// reserve makes room for a session an initialize is about to open. At the
// cap it closes the session idle longest; it returns false when every
// session is busy, and then nothing is reserved.
func (t *sessionTable) reserve() bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	var victim *session
	if t.max > 0 && len(t.byID)+t.reserved >= t.max {
		front := t.quiet.Front()
		if front == nil {
			t.mu.Unlock()
			t.stats.refused.Add(1)
			return false
		}
		victim = front.Value.(*session)
		t.removeLocked(victim)
	}
	t.reserved++
	t.mu.Unlock()
	if victim != nil {
		t.stats.evicted.Add(1)
		t.log.Debug("HTTP session evicted: the session cap is reached and it was idle longest", "session", victim.id,
			"idle", t.now().Sub(victim.since).Round(time.Millisecond).String())
		t.closeFn(victim.id)
	}
	return true
}

// unreserve gives back a reservation whose initialize opened no session.
func (t *sessionTable) unreserve() {
	t.mu.Lock()
	t.reserved--
	t.mu.Unlock()
}

// add turns a reservation into the session id, which negotiated version.
func (t *sessionTable) add(id, version string) {
	t.mu.Lock()
	t.reserved--
	if t.closed || t.byID[id] != nil {
		t.mu.Unlock()
		return
	}
	s := &session{id: id, version: version}
	t.byID[id] = s
	t.releaseLocked(s)
	t.mu.Unlock()
	t.stats.sessions.Add(1)
	liveSessions.Add(1)
	t.stats.opened.Add(1)
	t.log.Debug("HTTP session opened", "session", id, "version", version)
}

// acquire marks session id busy and returns it, or nil if it is not live.
// Every acquire is followed by one release.
func (t *sessionTable) acquire(id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byID[id]
	if s == nil {
		return nil
	}
	s.busy++
	if s.elem != nil {
		t.quiet.Remove(s.elem)
		s.elem = nil
	}
	return s
}

// release ends one request or stream of s; when none is left, s is idle
// from now.
func (t *sessionTable) release(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.busy--
	if !s.gone && s.busy == 0 {
		t.releaseLocked(s)
	}
}

// releaseLocked makes s idle from now. Its timer is started once, at the
// first release, and is not touched by later requests: when it fires it
// looks at how long s has been idle and waits again for the rest (expire),
// so that a request costs no timer operation.
func (t *sessionTable) releaseLocked(s *session) {
	s.since = t.now()
	s.elem = t.quiet.PushBack(s)
	if t.timeout > 0 && s.timer == nil {
		s.timer = time.AfterFunc(t.timeout, func() { t.expire(s) })
	}
}

// expire closes s if it has been idle for the timeout. A session busy when
// the timer fires is looked at again a timeout later, one idle for less is
// looked at again when its timeout would be up.
func (t *sessionTable) expire(s *session) {
	t.mu.Lock()
	if s.gone {
		t.mu.Unlock()
		return
	}
	if s.busy > 0 {
		s.timer.Reset(t.timeout)
		t.mu.Unlock()
		return
	}
	if idle := t.now().Sub(s.since); idle < t.timeout {
		s.timer.Reset(t.timeout - idle)
		t.mu.Unlock()
		return
	}
	t.removeLocked(s)
	t.mu.Unlock()
	t.log.Debug("HTTP session expired: idle for the session idle timeout", "session", s.id, "timeout", t.timeout.String())
	t.closeFn(s.id)
	// Counted once the go-sdk has closed it too: from then on its client
	// gets 404.
	t.stats.expired.Add(1)
}

// drop forgets session id, which the client deleted or the go-sdk no
// longer knows.
func (t *sessionTable) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byID[id]; s != nil {
		t.removeLocked(s)
		t.log.Debug("HTTP session ended", "session", id)
	}
}

func (t *sessionTable) removeLocked(s *session) {
	s.gone = true
	delete(t.byID, s.id)
	if s.elem != nil {
		t.quiet.Remove(s.elem)
		s.elem = nil
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	t.stats.sessions.Add(-1)
	liveSessions.Add(-1)
}

// close stops every timer and refuses new sessions; the go-sdk's sessions
// are closed by the caller.
func (t *sessionTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, s := range t.byID {
		t.removeLocked(s)
	}
}

// versionsBeforeStateless are the go-sdk's protocol versions that open a
// session at initialize, newest first.
var versionsBeforeStateless = slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= firstStatelessVersion })

// firstStatelessVersion is the first protocol version without initialize
// and sessions.
const firstStatelessVersion = "2026-07-28"

// Negotiated returns the protocol version the go-sdk answers an
// initialize that asked for asked: asked itself if it supports it, else
// the newest it supports (MCP lifecycle, "Version Negotiation").
func Negotiated(asked string) string {
	if slices.Contains(versionsBeforeStateless, asked) {
		return asked
	}
	if len(versionsBeforeStateless) == 0 {
		return ""
	}
	return versionsBeforeStateless[0]
}
