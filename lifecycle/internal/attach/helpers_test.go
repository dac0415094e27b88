package attach_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/attach"
)

// hangAfter is how long a test waits for something before it fails it as
// hung: a failure detector, not a speed goal.
const hangAfter = 30 * time.Second

// legacy is the last protocol version with initialize, whose clients the
// forwarder replays.
const legacy = "2025-11-25"

type whoOut struct {
	Server string `json:"server"`
	Client string `json:"client"`
}

// testServer is a server whose tools show what reaches it.
type testServer struct {
	*mcp.Server
	name    string
	counted atomic.Int64 // calls of the count tool
	release chan struct{}

	mu      sync.Mutex
	methods []string // every method received, in order
}

// newServer returns a server named name. Its block tool and its
// test://slow resource wait until release is closed (or the call is
// cancelled); when started is not nil, they send their name on it first.
func newServer(name string, started chan<- string) *testServer {
	ts := &testServer{name: name, release: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "v1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ts.mu.Lock()
			ts.methods = append(ts.methods, method)
			ts.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	wait := func(ctx context.Context, what string) error {
		if started != nil {
			started <- what
		}
		select {
		case <-ts.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "who"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoOut, error) {
		out := whoOut{Server: name}
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			out.Client = p.ClientInfo.Name
		}
		return nil, out, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoOut, error) {
		ts.counted.Add(1)
		return nil, whoOut{Server: name}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoOut, error) {
		return nil, whoOut{Server: name}, wait(ctx, "block")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "log"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoOut, error) {
		for _, level := range []mcp.LoggingLevel{"debug", "info", "warning"} {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Data: string(level)}); err != nil {
				return nil, whoOut{}, err
			}
		}
		return nil, whoOut{Server: name}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoOut, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "who are you?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, whoOut{}, err
		}
		client, _ := res.Content["name"].(string)
		return nil, whoOut{Server: name, Client: client}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: name}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://slow", Name: "slow"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if err := wait(ctx, "slow"); err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://slow", Text: name}}}, nil
	})
	ts.Server = s
	return ts
}

func (ts *testServer) received(method string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, m := range ts.methods {
		if m == method {
			n++
		}
	}
	return n
}

// writer is a Listener on a socket, as a writer runs it.
type writer struct {
	ts   *testServer
	l    *attach.Listener
	ln   *net.UnixListener
	path string
	done chan error
	logs *mcptest.Buffer // what the listener logged
}

func startWriter(t *testing.T, path string, ts *testServer) *writer {
	t.Helper()
	ln, err := attach.Listen(path)
	require.NoError(t, err)
	logs := new(mcptest.Buffer)
	l, err := attach.NewListener(attach.ListenerOptions{Server: ts.Server, Me: attach.Hello{Name: "test", Version: "v1"},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	w := &writer{ts: ts, l: l, ln: ln, path: path, done: make(chan error, 1), logs: logs}
	go func() { w.done <- l.Serve(ln) }()
	t.Cleanup(func() {
		attach.Unlisten(ln, path)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l.Shutdown(ctx)
	})
	return w
}

// handover stops w as a writer that hands over does: the socket first,
// then the sessions.
func (w *writer) handover(t *testing.T) {
	t.Helper()
	require.NoError(t, w.stop())
}

func (w *writer) stop() error {
	err := attach.Unlisten(w.ln, w.path)
	ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
	defer cancel()
	return errors.Join(err, w.l.Shutdown(ctx), <-w.done)
}

// crash stops w as its death would: no goodbye, the socket file left.
func (w *writer) crash(t *testing.T) {
	t.Helper()
	require.NoError(t, w.ln.Close())
	w.l.Crash()
	require.NoError(t, <-w.done)
}

// attached is a go-sdk client whose messages go through a Forwarder, which
// attaches to whatever writer listens at path, again after each handover.
type attached struct {
	cs       *mcp.ClientSession
	f        *attach.Forwarder
	done     chan error // the forwarder's end
	attaches atomic.Int32
	writers  chan int // the pid each Attach is given
}

type clientOpts struct {
	client  *mcp.ClientOptions
	session *mcp.ClientSessionOptions
	check   string
}

func attachClient(t *testing.T, path string, o *clientOpts) *attached {
	t.Helper()
	if o == nil {
		o = &clientOpts{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ct, ft := mcp.NewInMemoryTransports()
	fc, err := ft.Connect(ctx)
	require.NoError(t, err)
	a := &attached{done: make(chan error, 1), writers: make(chan int, 100)}
	a.f = attach.NewForwarder(fc, attach.ForwarderOptions{Check: o.check})
	go func() {
		for {
			var conn *attach.Conn
			for conn == nil {
				c, err := attach.Dial(ctx, path, attach.Hello{Name: "test"})
				if err != nil && !errors.Is(err, attach.ErrNoWriter) {
					a.done <- err
					return
				}
				conn = c
				if conn == nil {
					select {
					case <-ctx.Done():
						a.done <- ctx.Err()
						return
					case <-time.After(time.Millisecond):
					}
				}
			}
			a.attaches.Add(1)
			a.writers <- conn.Writer.PID
			err := a.f.Attach(ctx, conn, conn.Writer.PID)
			if !errors.Is(err, attach.ErrWriterGone) {
				a.done <- err
				return
			}
		}
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "tester", Version: "v9"}, o.client)
	a.cs, err = client.Connect(ctx, ct, o.session)
	require.NoError(t, err)
	t.Cleanup(func() {
		a.cs.Close()
		cancel()
		select {
		case <-a.done:
		case <-time.After(hangAfter):
			t.Errorf("the forwarder did not end within %v", hangAfter)
		}
		a.f.Close()
	})
	return a
}

func who(t *testing.T, cs *mcp.ClientSession) whoOut {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "who"})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	var out whoOut
	remarshal(t, res.StructuredContent, &out)
	return out
}

// remarshal decodes v, as JSON, into out.
func remarshal(t *testing.T, v, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}
