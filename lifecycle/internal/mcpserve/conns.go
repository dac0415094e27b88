package mcpserve

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter is a listener that keeps at most max connections open. When
// it is full, it makes room by closing a quiet connection: first the
// oldest that has not sent a whole request within freshGrace of being
// accepted (the way a flood of silent or dripping connections looks),
// and only when there is no such connection left, the one idle longest
// between requests (a client's keep-alive connection). A connection with
// a request in progress, an event stream among them, is never closed by
// it. While no connection can be closed, Accept waits (new connections
// wait in the kernel's backlog). The http.Server must report connection
// states to connState.
type connLimiter struct {
	net.Listener
	max   int // <= 0: no cap
	stats *Stats

	mu     sync.Mutex
	cond   sync.Cond
	open   int       // connections open
	fresh  list.List // of *limitedConn that have sent no whole request yet, oldest first
	idle   list.List // of *limitedConn idle between requests, longest idle first
	closed bool
}

// freshGrace is how long a new connection has to send its first request's
// headers before the limiter may close it to make room: a real client
// sends them at once, and a burst of connections must not push it out
// before the server has read them.
const freshGrace = 100 * time.Millisecond

func newConnLimiter(ln net.Listener, max int, stats *Stats) *connLimiter {
	l := &connLimiter{Listener: ln, max: max, stats: stats}
	l.cond.L = &l.mu
	return l
}

// limitedConn is a connection the limiter counts.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	in    *list.List    // l.fresh, l.idle, or nil while busy
	elem  *list.Element // its place in in
	since time.Time     // when it was accepted
	done  bool
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		if err := l.waitForRoom(); err != nil {
			return nil, err
		}
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// victimLocked returns the connection to close to make room, or nil if
// none may be closed now; with it, the time at which the oldest fresh
// connection's grace ends (zero if there is none).
func (l *connLimiter) victimLocked(now time.Time) (*limitedConn, time.Time) {
	if front := l.fresh.Front(); front != nil {
		c := front.Value.(*limitedConn)
		if end := c.since.Add(freshGrace); now.Before(end) {
			return nil, end
		}
		return c, time.Time{}
	}
	if front := l.idle.Front(); front != nil {
		return front.Value.(*limitedConn), time.Time{}
	}
	return nil, time.Time{}
}

// waitForRoom waits while the cap is reached and no connection may be
// closed to make room.
func (l *connLimiter) waitForRoom() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && l.max > 0 && l.open >= l.max {
		victim, graceEnds := l.victimLocked(time.Now())
		if victim != nil {
			break
		}
		var wake *time.Timer
		if !graceEnds.IsZero() {
			wake = time.AfterFunc(time.Until(graceEnds), func() {
				l.mu.Lock()
				l.cond.Broadcast()
				l.mu.Unlock()
			})
		}
		l.cond.Wait()
		if wake != nil {
			wake.Stop()
		}
	}
	if l.closed {
		return net.ErrClosed
	}
	return nil
}

// admit counts c in, closing a quiet connection first if the cap is
// reached. It returns nil, having closed c, if no connection may be closed
// any more (they became busy meanwhile).
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	now := time.Now()
	l.mu.Lock()
	var victim *limitedConn
	if l.max > 0 && l.open >= l.max {
		if victim, _ = l.victimLocked(now); victim == nil {
			l.mu.Unlock()
			c.Close()
			return nil
		}
		l.forgetLocked(victim)
	}
	lc := &limitedConn{Conn: c, l: l, since: now}
	lc.move(&l.fresh)
	l.open++
	l.mu.Unlock()
	l.stats.connections.Add(1)
	if victim != nil {
		l.stats.connsClosed.Add(1)
		victim.Conn.Close()
	}
	return lc
}

// Close closes the listener and wakes an Accept waiting for room.
func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// connState is the http.Server's ConnState hook: it tells quiet
// connections from busy ones.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.done {
		return
	}
	switch state {
	case http.StateActive:
		lc.move(nil)
		l.cond.Broadcast() // the fresh list's front may have changed
	case http.StateIdle:
		lc.move(&l.idle)
		l.cond.Broadcast() // room can be made now
	case http.StateHijacked:
		l.forgetLocked(lc) // the handler owns it now
	}
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func (l *connLimiter) forgetLocked(c *limitedConn) {
	if c.done {
		return
	}
	c.done = true
	c.move(nil)
	l.open--
	l.stats.connections.Add(-1)
	l.cond.Broadcast()
}

// move takes c out of its list and puts it at the back of to, if not
// nil. The limiter's lock is held.
func (c *limitedConn) move(to *list.List) {
	if c.in != nil {
		c.in.Remove(c.elem)
		c.in, c.elem = nil, nil
	}
	if to != nil {
		c.in, c.elem = to, to.PushBack(c)
	}
}

// CloseWrite half-closes a TCP connection, which net/http does before it
// closes one whose request body it did not read.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
