//go:build unix

package attach

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/inflight"
)

// methodHandover is the notification a writer that hands over sends each
// forwarder last, naming the requests it read and did not answer. A
// forwarder never passes it on to its client.
const methodHandover = "notifications/mcpkeep/handover"

// handoverParams are methodHandover's params.
type handoverParams struct {
	Unanswered []any `json:"unanswered"` // request ids, as JSON-RPC writes them
}

// DrainTimeout bounds how long a session whose forwarder went away waits
// for the calls it had read to finish.
const DrainTimeout = 5 * time.Second

// session is one connection served by a Listener: what the writer knows of
// it, and the requests it read and has not answered.
type session struct {
	l     *Listener
	conn  io.Closer     // what Shutdown closes
	ready chan struct{} // closed once the session is listed: nothing is read before

	stopCtx    context.Context // cancelled by stop
	cancelStop context.CancelFunc

	mu       sync.Mutex
	info     Session
	named    bool                    // the client has said who it is
	pending  map[jsonrpc.ID]struct{} // read, not yet answered
	idle     chan struct{}           // closed and replaced whenever pending empties
	handover bool                    // stopped by Shutdown: say goodbye
	stopDone <-chan struct{}         // ends the drain after stop
}

func newSession(l *Listener, info Session, conn io.Closer) *session {
	ctx, cancel := context.WithCancel(context.Background())
	return &session{l: l, conn: conn, ready: make(chan struct{}), stopCtx: ctx, cancelStop: cancel,
		info: info, pending: map[jsonrpc.ID]struct{}{}, idle: make(chan struct{})}
}

func (s *session) snapshot() Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// stop ends reading: Read drains the requests read until done is closed,
// then ends the session, whose Close says goodbye.
func (s *session) stop(done <-chan struct{}) {
	s.mu.Lock()
	if !s.handover {
		s.handover, s.stopDone = true, done
	}
	s.mu.Unlock()
	s.cancelStop()
}

// sessionTransport is the mcp.Transport of one session.
type sessionTransport struct {
	s     *session
	inner mcp.Transport
}

func (t *sessionTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	// A request that reuses the id of one in progress, which the go-sdk
	// drops unanswered, is answered by inflight and never counted here.
	return &sessionConn{Connection: inflight.Wrap(c), s: t.s}, nil
}

// sessionConn tracks the requests read and answered, learns the client's
// name, drains and says goodbye when the session is stopped.
type sessionConn struct {
	mcp.Connection
	s *session
}

func (c *sessionConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	s := c.s
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.stopCtx, cancel)()
	msg, err := c.Connection.Read(rctx)
	if err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok {
			s.read(req)
		}
		return msg, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	stopped := s.stopCtx.Err() != nil
	if stopped || errors.Is(err, io.EOF) {
		s.drain()
		return nil, io.EOF
	}
	return nil, err
}

// read records a request read from the forwarder.
func (s *session) read(req *jsonrpc.Request) {
	s.mu.Lock()
	if req.IsCall() && !parked(req.Method) {
		s.pending[req.ID] = struct{}{}
	}
	named := s.named
	s.mu.Unlock()
	if named || s.info.Own {
		return
	}
	if name, version, ok := clientInfo(req); ok {
		s.mu.Lock()
		s.named, s.info.Client, s.info.ClientVersion = true, name, version
		s.mu.Unlock()
		s.l.changed()
	}
}

// clientInfo returns what req says of its client: the clientInfo of an
// initialize request, or of a request's _meta (protocol 2026-07-28 on).
func clientInfo(req *jsonrpc.Request) (name, version string, ok bool) {
	if len(req.Params) == 0 {
		return "", "", false
	}
	type impl struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	var p struct {
		ClientInfo *impl `json:"clientInfo"`
		Meta       struct {
			ClientInfo *impl `json:"io.modelcontextprotocol/clientInfo"`
		} `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return "", "", false
	}
	ci := p.Meta.ClientInfo
	if req.Method == "initialize" {
		ci = p.ClientInfo
	}
	if ci == nil || ci.Name == "" {
		return "", "", false
	}
	return ci.Name, ci.Version, true
}

// parked reports whether a request of method stays unanswered for as long
// as its client wants (subscriptions/listen): a drain does not wait for it,
// and a forwarder sends it again to the next writer.
func parked(method string) bool { return method == "subscriptions/listen" }

// drain waits until every request read has been answered, the stop's
// deadline passes, or DrainTimeout.
func (s *session) drain() {
	t := time.NewTimer(DrainTimeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		n, idle, done := len(s.pending), s.idle, s.stopDone
		s.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-idle:
		case <-done:
			return
		case <-t.C:
			return
		}
	}
}

func (c *sessionConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	// The response is written before the request stops counting as
	// unanswered: a goodbye must never leave out a request whose answer
	// the forwarder has not got, or it would send it again.
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		s := c.s
		s.mu.Lock()
		delete(s.pending, resp.ID)
		if len(s.pending) == 0 {
			close(s.idle)
			s.idle = make(chan struct{})
		}
		s.mu.Unlock()
	}
	return err
}

// Close says goodbye, if the writer is handing over, and closes the
// connection.
func (c *sessionConn) Close() error {
	s := c.s
	s.mu.Lock()
	handover := s.handover
	ids := make([]any, 0, len(s.pending))
	for id := range s.pending {
		ids = append(ids, id.Raw())
	}
	s.mu.Unlock()
	if handover && failpoint.Hit("attach.writer-before-goodbye") == nil {
		if n, err := jsonrpc2Notification(methodHandover, handoverParams{Unanswered: ids}); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), HelloTimeout)
			_ = c.Connection.Write(ctx, n)
			cancel()
		}
	}
	return c.Connection.Close()
}

// jsonrpc2Notification builds a notification.
func jsonrpc2Notification(method string, params any) (*jsonrpc.Request, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return &jsonrpc.Request{Method: method, Params: raw}, nil
}
