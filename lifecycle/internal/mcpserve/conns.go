package mcpserve

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// connLimiter is a listener that keeps at most max connections open. When
// it is full, it makes room by closing a quiet connection: first the
// oldest that has not sent a whole request yet (the way a flood of silent
// or dripping connections looks), then the one idle longest between
// requests (a client's keep-alive connection). A connection with a request
// in progress, an event stream among them, is never closed by it; when
// every connection is busy, Accept waits until one closes (new connections
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

func newConnLimiter(ln net.Listener, max int, stats *Stats) *connLimiter {
	l := &connLimiter{Listener: ln, max: max, stats: stats}
	l.cond.L = &l.mu
	return l
}

// limitedConn is a connection the limiter counts.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	in   *list.List    // l.fresh, l.idle, or nil while busy
	elem *list.Element // its place in in
	done bool
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

// waitForRoom waits while the cap is reached and every connection is busy.
func (l *connLimiter) waitForRoom() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && l.max > 0 && l.open >= l.max && l.fresh.Len()+l.idle.Len() == 0 {
		l.cond.Wait()
	}
	if l.closed {
		return net.ErrClosed
	}
	return nil
}

// admit counts c in, closing the quietest connection first if the cap is
// reached. It returns nil, having closed c, if every other connection
// became busy meanwhile.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	l.mu.Lock()
	var victim *limitedConn
	if l.max > 0 && l.open >= l.max {
		front := l.fresh.Front()
		if front == nil {
			front = l.idle.Front()
		}
		if front == nil {
			l.mu.Unlock()
			c.Close()
			return nil
		}
		victim = front.Value.(*limitedConn)
		l.forgetLocked(victim)
	}
	lc := &limitedConn{Conn: c, l: l}
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
