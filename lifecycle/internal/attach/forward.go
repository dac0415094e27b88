//go:build unix

package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/inflight"
)

// CodeOutcomeUnknown is the JSON-RPC error code of a call that was in
// flight when its writer stopped: it may or may not have run.
const CodeOutcomeUnknown = -32010

// ErrWriterGone: the writer's end of the connection closed. Attach again,
// to the next writer.
var ErrWriterGone = errors.New("attach: the writer went away")

// WriterGoneError is Attach's error when the writer went away.
type WriterGoneError struct {
	PID   int  // the writer that went
	Clean bool // it handed over: it said which requests it read and did not answer
}

// Error says which writer went, and how.
func (e *WriterGoneError) Error() string {
	if e.Clean {
		return fmt.Sprintf("attach: the writer (pid %d) handed over", e.PID)
	}
	return fmt.Sprintf("attach: the writer (pid %d) went away without handing over", e.PID)
}

// Unwrap returns ErrWriterGone.
func (e *WriterGoneError) Unwrap() error { return ErrWriterGone }

// ForwarderOptions configure a Forwarder. The zero value is usable.
type ForwarderOptions struct {
	// Check tells a client how to find out what became of a call whose
	// outcome is unknown, e.g. "the history tool, or `mcpkeep history
	// --home /h`"; it ends the error's message.
	Check string
	// DrainTimeout bounds the wait for answers to the calls in flight once
	// the client's input has ended (or Attach's ctx): DrainTimeout when 0.
	DrainTimeout time.Duration
	// Logger; nil = discard.
	Logger *slog.Logger
}

// Forwarder passes one MCP client's messages to the writer and back, and
// carries the client's session from one writer to the next. Attach runs
// it on one writer's connection; after a *WriterGoneError, Attach it to
// the next writer. A message is handled by the goroutine that read it,
// under one lock: one goroutine owned by the Forwarder reads the client
// (Close stops it), one owned by Attach reads the writer.
type Forwarder struct {
	opts   ForwarderOptions
	log    *slog.Logger
	client *inflight.Conn // answers a request reusing an id in progress: the forwarder never sees one

	gone       chan struct{} // closed when the client's input ends
	readerDone chan struct{}
	wake       chan struct{} // the attachment's loop has something to look at

	mu          sync.Mutex        // guards what follows
	cur         *attachment       // the writer attached to, nil between writers
	in          []jsonrpc.Message // the client's messages while no writer takes them
	inErr       error             // the client's input ended
	gen         int               // the number of the current writer, from 1
	writerPID   int               // the current writer
	init        *jsonrpc.Request  // the client's initialize, once answered with success
	initAt      time.Time         // when a writer first answered a call of the client's with success, UTC
	initialized bool              // the client sent notifications/initialized
	logLevel    json.RawMessage   // the params of the last logging/setLevel
	subs        []json.RawMessage // the params of each resources/subscribe still on
	subURIs     []string          // their URIs, in the same order
	calls       map[jsonrpc.ID]*call
	seq         int64               // orders calls
	swallow     map[jsonrpc.ID]bool // replayed requests whose answers the client must not see
	serverReqs  map[jsonrpc.ID]serverReq
	serverIDs   map[jsonrpc.ID]jsonrpc.ID // the current writer's request id -> ours
	nextID      int64
	ended       bool // the client's input ended, or Attach's ctx
	broken      bool // the client's output failed
}

// call is a request of the client's that has no answer yet.
type call struct {
	req  *jsonrpc.Request
	seq  int64
	sent bool // written to the current writer
}

// serverReq is a request of a writer's to the client, under an id of ours.
type serverReq struct {
	gen int
	id  jsonrpc.ID // the writer's
}

// NewForwarder returns a Forwarder for the client on conn (the process's
// stdio, through go-sdk's IOTransport) and starts reading it.
func NewForwarder(client mcp.Connection, opts ForwarderOptions) *Forwarder {
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DrainTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{opts: opts, log: log, client: inflight.Wrap(client),
		gone: make(chan struct{}), readerDone: make(chan struct{}), wake: make(chan struct{}, 1),
		calls: map[jsonrpc.ID]*call{}, swallow: map[jsonrpc.ID]bool{},
		serverReqs: map[jsonrpc.ID]serverReq{}, serverIDs: map[jsonrpc.ID]jsonrpc.ID{}}
	go f.readClient()
	return f
}

// readClient reads the client until its input ends: each message goes to
// the writer at once, or waits while no writer takes it. Once an Attach's
// ctx ended, what the client still sends is dropped, but for its answers
// to the writer's requests, which calls in flight may wait for.
func (f *Forwarder) readClient() {
	defer close(f.readerDone)
	for {
		msg, err := f.client.Read(context.Background())
		f.mu.Lock()
		switch {
		case err != nil:
			f.inErr = err
			f.ended = true
		case f.ended && !isResponse(msg):
		case f.cur != nil && f.cur.live:
			f.cur.fromClient(msg)
		default:
			f.in = append(f.in, msg)
		}
		ended := f.ended
		f.mu.Unlock()
		if ended {
			f.poke()
		}
		if err != nil {
			close(f.gone)
			return
		}
	}
}

func isResponse(msg jsonrpc.Message) bool {
	_, ok := msg.(*jsonrpc.Response)
	return ok
}

// poke wakes the attachment's loop.
func (f *Forwarder) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// InitializedAt returns when the client initialized: when a writer first
// answered one of its calls with success (its initialize or, from protocol
// 2026-07-28 on, which has none, its first request), UTC; zero until then.
// Replays to later writers leave it.
func (f *Forwarder) InitializedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.initAt
}

// Gone is closed when the client's input has ended: the client went away.
func (f *Forwarder) Gone() <-chan struct{} { return f.gone }

// Done reports whether the forwarder has nothing left to do: its client's
// input ended (or an Attach's ctx did) and no call waits for an answer, or
// its client's output failed.
func (f *Forwarder) Done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done()
}

func (f *Forwarder) done() bool { return f.broken || f.ended && f.waiting() == 0 }

// Unanswered reports whether a call of the client's waits for an answer:
// one no writer has taken yet, or one sent that has none.
func (f *Forwarder) Unanswered() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, msg := range f.in {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			return true
		}
	}
	return f.waiting() > 0
}

// waiting counts the calls that wait for an answer, leaving out the
// subscriptions/listen a client leaves open for as long as it runs.
func (f *Forwarder) waiting() int {
	n := 0
	for _, c := range f.calls {
		if !parked(c.req.Method) {
			n++
		}
	}
	return n
}

// Attach forwards between the client and the writer at the other end of w
// (a Conn, or a pipe to the writer's own Listener.ServeOwn) until the
// client has gone and every call it made is answered, or its output fails,
// (nil), ctx ends and the calls in flight are answered or DrainTimeout
// passes (nil), or the writer goes (a *WriterGoneError). Before anything
// else it replays the client's session on the writer; then it sends the
// calls the last writer never read, or may have read but that are free of
// effects. writerPID names the writer in errors. Attach closes w. Calls of
// Attach must not overlap.
func (f *Forwarder) Attach(ctx context.Context, w io.ReadWriteCloser, writerPID int) error {
	wc, err := (&mcp.IOTransport{Reader: w, Writer: w}).Connect(ctx)
	if err != nil {
		w.Close()
		return err
	}
	a := &attachment{f: f, ctx: ctx, wc: wc, eof: make(chan struct{}), initDone: make(chan struct{})}
	f.mu.Lock()
	f.gen++
	f.writerPID = writerPID
	clear(f.serverIDs)
	clear(f.swallow)
	f.cur = a
	f.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(a.readWriter)
	defer func() {
		f.mu.Lock()
		f.cur = nil
		f.mu.Unlock()
		wc.Close()
		wg.Wait()
	}()
	return a.run()
}

// attachment is one Attach.
type attachment struct {
	f        *Forwarder
	ctx      context.Context
	wc       mcp.Connection
	eof      chan struct{} // closed when the writer's end closed
	live     bool          // the session is replayed: the client's messages go to the writer
	goodbye  map[jsonrpc.ID]bool
	initID   jsonrpc.ID    // the replayed initialize
	initDone chan struct{} // closed when it is answered
	initErr  error         // its error
}

// readWriter reads the writer until its end closes, handling each message.
func (a *attachment) readWriter() {
	f := a.f
	for {
		msg, err := a.wc.Read(context.Background())
		if err != nil {
			close(a.eof)
			return
		}
		f.mu.Lock()
		a.fromWriter(msg)
		done := f.done()
		f.mu.Unlock()
		if done {
			f.poke()
		}
	}
}

func (a *attachment) run() error {
	f := a.f
	if err := a.replay(); err != nil {
		return err
	}
	f.mu.Lock()
	// Calls left by the last writer, then whatever the client sent meanwhile.
	for _, c := range f.ordered() {
		if !c.sent {
			a.send(c)
		}
	}
	for _, m := range f.in {
		a.fromClient(m)
	}
	f.in = nil
	a.live = true
	f.mu.Unlock()

	var drain <-chan time.Time
	for {
		f.mu.Lock()
		done, ended := f.done(), f.ended
		f.mu.Unlock()
		if done {
			return nil
		}
		var ctxDone <-chan struct{}
		if ended {
			if drain == nil {
				t := time.NewTimer(f.opts.DrainTimeout)
				defer t.Stop()
				drain = t.C
			}
		} else {
			ctxDone = a.ctx.Done()
		}
		select {
		case <-a.eof:
			f.mu.Lock()
			defer f.mu.Unlock()
			return a.lost()
		case <-f.wake:
		case <-ctxDone:
			f.mu.Lock()
			f.ended = true
			f.mu.Unlock()
		case <-drain:
			f.mu.Lock()
			f.log.Warn("attach: the client went away with calls unanswered", "calls", len(f.calls))
			f.broken = true // nothing more will be read or answered
			f.mu.Unlock()
			return nil
		}
	}
}

// write sends msg to the writer and reports whether it went. A failed
// write is not an error here: the writer is gone, which its reader
// reports next.
func (a *attachment) write(msg jsonrpc.Message) bool {
	if err := a.wc.Write(context.Background(), msg); err != nil {
		a.f.log.Debug("attach: write to the writer failed", "err", err)
		return false
	}
	return true
}
