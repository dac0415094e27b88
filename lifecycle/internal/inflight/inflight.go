// Package inflight answers a JSON-RPC request that reuses the id of a
// request still in progress, which the go-sdk drops without an answer
// (v1.8.0's jsonrpc2 Connection.acceptRequest clears its id and writes
// nothing). JSON-RPC wants an answer to every request: Conn answers such a
// request with Invalid Request and that id, just after the first
// request's answer, so that a client matching answers to ids in order
// reads that one first; or at once when the request in progress is a
// subscriptions/listen stream, which is answered only when the session
// ends.
//
// It does not check ids otherwise: an id may be used again once its
// answer is written, as JSON-RPC allows (MCP asks clients never to).
package inflight

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Conn wraps the connection of the side that answers requests (a server's,
// or a forwarder's to its client). Requests whose id is in use never
// reach its reader: Read answers them, or Write does after the answer to
// the request in progress. Its methods may be called concurrently, as
// mcp.Connection's.
type Conn struct {
	mcp.Connection

	mu    sync.Mutex
	calls map[jsonrpc.ID]call // requests read and not answered yet
}

// call is a request read and not answered yet.
type call struct {
	stream bool // a subscriptions/listen request: answered when the session ends
	again  int  // requests read with the same id since: each is owed an error
}

// Wrap returns c wrapped.
func Wrap(c mcp.Connection) *Conn {
	return &Conn{Connection: c, calls: map[jsonrpc.ID]call{}}
}

// Read returns the next message that is not a request reusing an id in
// progress.
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			return msg, nil
		}
		pass, now := c.read(req)
		if pass {
			return msg, nil
		}
		if now {
			// A failed write is the reader's to see, on its own next one.
			_ = c.Connection.Write(ctx, InUse(req.ID))
		}
	}
}

// read records req. It reports whether req goes on to the reader; if not,
// its id is in use, and now says whether to answer it at once rather than
// after the answer of the request in progress.
func (c *Conn) read(req *jsonrpc.Request) (pass, now bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, busy := c.calls[req.ID]; busy {
		if p.stream {
			return false, true
		}
		p.again++
		c.calls[req.ID] = p
		return false, false
	}
	c.calls[req.ID] = call{stream: req.Method == "subscriptions/listen"}
	return true, false
}

// Write writes msg; after a response, it writes the answers owed to the
// requests that reused its id meanwhile.
func (c *Conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return c.Connection.Write(ctx, msg)
	}
	// The id is free once its answer is written: a client may use it
	// again as soon as it reads the answer, so it is freed before.
	again := c.free(resp.ID)
	err := c.Connection.Write(ctx, msg)
	if werr := c.owed(ctx, resp.ID, again); err == nil {
		err = werr
	}
	return err
}

// Drop frees id, whose request will get no answer (its client cancelled
// it, and the answer is dropped), and answers the requests that reused it.
func (c *Conn) Drop(ctx context.Context, id jsonrpc.ID) error {
	return c.owed(ctx, id, c.free(id))
}

// free forgets the request with id, returning how many answers its reuses
// are owed.
func (c *Conn) free(id jsonrpc.ID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[id]
	delete(c.calls, id)
	return p.again
}

// owed writes n answers to requests that reused id.
func (c *Conn) owed(ctx context.Context, id jsonrpc.ID, n int) error {
	var err error
	for range n {
		if werr := c.Connection.Write(ctx, InUse(id)); err == nil {
			err = werr
		}
	}
	return err
}

// InUse is the answer to a request whose id is that of a request in
// progress.
func InUse(id jsonrpc.ID) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("request id %v is already in use by a request in progress: "+
			"give each request an id of its own (MCP: an id is never reused in a session)", id.Raw())}}
}
