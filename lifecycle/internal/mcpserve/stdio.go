package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
// It also answers a request whose id is that of a request still in
// progress, which the go-sdk drops without an answer (jsonrpc2's
// Connection.acceptRequest clears its id): JSON-RPC wants an answer to
// every request, and the drain would wait for it. The answer is Invalid
// Request with that id, written just after the first request's answer so
// that a client matching answers to ids in order reads that one first.
type drainTransport struct {
	inner   mcp.Transport
	timeout time.Duration

	mu      sync.Mutex
	calls   map[jsonrpc.ID]call // requests read and not answered yet
	pending int                 // answers owed, streams aside: what drain waits for
	idle    chan struct{}       // closed and replaced whenever pending drops to 0
	stopCh  chan struct{}
	stopped sync.Once
	endCh   chan struct{} // closed when Read returned its last message: stdin is done
	ended   sync.Once
}

func newDrainTransport(inner mcp.Transport, timeout time.Duration) *drainTransport {
	return &drainTransport{inner: inner, timeout: timeout, calls: make(map[jsonrpc.ID]call), idle: make(chan struct{}), stopCh: make(chan struct{}), endCh: make(chan struct{})}
}

// call is a request read and not answered yet.
type call struct {
	// stream is set for a subscriptions/listen request, a 2026-07-28
	// client's notification stream: it is answered only when the session
	// ends, so it is not a call to drain.
	stream bool
	// again counts the requests read with the same id before its answer;
	// each gets an Invalid Request error after it.
	again int
}

// read records request req, read from stdin. It reports whether req goes
// on to the go-sdk; if not, its id is in use, and answerNow says whether
// to answer it at once (the request in progress is a stream) rather than
// after that request's answer.
func (t *drainTransport) read(req *jsonrpc.Request) (ok, answerNow bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, busy := t.calls[req.ID]; busy {
		if c.stream {
			return false, true
		}
		c.again++
		t.calls[req.ID] = c
		t.pending++
		return false, false
	}
	stream := req.Method == "subscriptions/listen"
	t.calls[req.ID] = call{stream: stream}
	if !stream {
		t.pending++
	}
	return true, false
}

// idInUse is the answer to a request whose id is that of a request in
// progress.
func idInUse(id jsonrpc.ID) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("request id %v is already in use by a request in progress: "+
			"give each request an id of its own (MCP: an id is never reused in a session)", id.Raw())}}
}

func (t *drainTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainConn{Connection: c, t: t}, nil
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
	var (
		msg jsonrpc.Message
		err error
	)
	for {
		msg, err = c.Connection.Read(rctx)
		if err != nil {
			break
		}
		req, isReq := msg.(*jsonrpc.Request)
		if !isReq || !req.IsCall() {
			return msg, nil
		}
		ok, answerNow := t.read(req)
		if ok {
			return msg, nil
		}
		if answerNow {
			// A failed write is the go-sdk's to see, on its own next one.
			_ = c.Connection.Write(ctx, idInUse(req.ID))
		}
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
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return c.Connection.Write(ctx, msg)
	}
	t := c.t
	// The id is free once its answer is written: a client may reuse it as
	// soon as it reads the answer, so it is freed before.
	t.mu.Lock()
	req, found := t.calls[resp.ID]
	delete(t.calls, resp.ID)
	t.mu.Unlock()
	err := c.Connection.Write(ctx, msg)
	if !found || req.stream {
		return err
	}
	for range req.again {
		if werr := c.Connection.Write(ctx, idInUse(resp.ID)); err == nil {
			err = werr
		}
	}
	t.mu.Lock()
	t.pending -= 1 + req.again
	if t.pending <= 0 {
		close(t.idle)
		t.idle = make(chan struct{})
	}
	t.mu.Unlock()
	return err
}
