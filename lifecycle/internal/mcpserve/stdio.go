package mcpserve

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/inflight"
)

// drainTransport wraps a stdio transport so that a request already read
// when stdin reaches EOF is still answered: the SDK tears the session down
// as soon as Read returns EOF, dropping calls in flight (go-sdk #1061).
// Read holds the EOF back until every request read so far has had its
// response written, or until the drain timeout; a subscriptions/listen
// request is a stream that lasts as long as the session, not a call to
// wait for. stop makes Read behave as if stdin had ended, for a graceful
// shutdown.
//
// It wraps the transport's connection in an inflight.Conn, which answers a
// request whose id is that of a request still in progress (the go-sdk
// drops it unanswered): such a request never reaches the drain's count.
type drainTransport struct {
	inner   mcp.Transport
	timeout time.Duration

	mu      sync.Mutex
	pending int
	streams map[jsonrpc.ID]bool // subscriptions/listen requests: streams, not calls to drain
	idle    chan struct{}       // closed and replaced whenever pending drops to 0
	stopCh  chan struct{}
	stopped sync.Once
	endCh   chan struct{} // closed when Read returned its last message: stdin is done
	ended   sync.Once
}

func newDrainTransport(inner mcp.Transport, timeout time.Duration) *drainTransport {
	return &drainTransport{inner: inner, timeout: timeout, streams: make(map[jsonrpc.ID]bool), idle: make(chan struct{}), stopCh: make(chan struct{}), endCh: make(chan struct{})}
}

func (t *drainTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainConn{Connection: inflight.Wrap(c), t: t}, nil
}

// stop ends reading: Read drains and returns io.EOF.
func (t *drainTransport) stop() { t.stopped.Do(func() { close(t.stopCh) }) }

type drainConn struct {
	mcp.Connection
	t *drainTransport
}

func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	t := c.t
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.stopCh:
			cancel()
		case <-rctx.Done():
		}
	}()
	msg, err := c.Connection.Read(rctx)
	if err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			t.mu.Lock()
			if req.Method == "subscriptions/listen" {
				// A 2026-07-28 client's notification stream: it is
				// answered only when the session ends.
				t.streams[req.ID] = true
			} else {
				t.pending++
			}
			t.mu.Unlock()
		}
		return msg, nil
	}
	stopping := false
	select {
	case <-t.stopCh:
		stopping = true
	default:
	}
	defer t.ended.Do(func() { close(t.endCh) })
	if ctx.Err() == nil && (errors.Is(err, io.EOF) || stopping) {
		c.drain()
		return nil, io.EOF
	}
	return nil, err
}

// drain waits until every request read has been answered.
func (c *drainConn) drain() {
	t := c.t
	deadline := time.NewTimer(t.timeout)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		n, idle := t.pending, t.idle
		t.mu.Unlock()
		if n <= 0 {
			return
		}
		select {
		case <-idle:
		case <-deadline.C:
			return
		}
	}
}

func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		t := c.t
		t.mu.Lock()
		if t.streams[resp.ID] {
			delete(t.streams, resp.ID)
			t.mu.Unlock()
			return err
		}
		t.pending--
		if t.pending <= 0 {
			close(t.idle)
			t.idle = make(chan struct{})
		}
		t.mu.Unlock()
	}
	return err
}
