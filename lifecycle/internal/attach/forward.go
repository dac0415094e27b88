//go:build unix

package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
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
	client mcp.Connection

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
	f := &Forwarder{opts: opts, log: log, client: client,
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

// replay sets the client's session up on the writer, as the client set it
// up on the last one, without the client seeing it: initialize (whose
// answer it waits for), initialized, the logging level, the subscriptions.
// A client of protocol 2026-07-28 or later sent no initialize: each of its
// requests says in its _meta what initialize said, so nothing is replayed.
func (a *attachment) replay() error {
	f := a.f
	f.mu.Lock()
	init := f.init
	f.mu.Unlock()
	if init == nil {
		return nil
	}
	if err := failpoint.Hit("attach.before-replay"); err != nil {
		return err
	}
	f.mu.Lock()
	a.initID = a.replayID("initialize")
	a.write(&jsonrpc.Request{ID: a.initID, Method: "initialize", Params: init.Params})
	f.mu.Unlock()
	select {
	case <-a.initDone:
	case <-a.eof:
		f.mu.Lock()
		defer f.mu.Unlock()
		return a.lost()
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.initErr != nil {
		return fmt.Errorf("attach: the writer (pid %d) refused the client's initialize, replayed: %w", f.writerPID, a.initErr)
	}
	if f.initialized {
		a.write(&jsonrpc.Request{Method: "notifications/initialized"})
	}
	if f.logLevel != nil {
		a.write(&jsonrpc.Request{ID: a.replayID("logging"), Method: "logging/setLevel", Params: f.logLevel})
	}
	for i, p := range f.subs {
		a.write(&jsonrpc.Request{ID: a.replayID("subscribe-" + f.subURIs[i]), Method: "resources/subscribe", Params: p})
	}
	f.log.Debug("attach: session replayed", "writer", f.writerPID)
	return nil
}

// replayID returns an id for a replayed request, whose answer is not
// passed on. No call of the client's is sent before the replayed
// initialize is answered, so the id cannot clash with one of the client's
// in flight on this writer.
func (a *attachment) replayID(what string) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(fmt.Sprintf("mcpkeep-replay-%d-%s", a.f.gen, what))
	a.f.swallow[id] = true
	return id
}

// write sends msg to the writer. A failed write is not an error here: the
// writer is gone, which its reader reports next.
func (a *attachment) write(msg jsonrpc.Message) {
	if err := a.wc.Write(context.Background(), msg); err != nil {
		a.f.log.Debug("attach: write to the writer failed", "err", err)
	}
}

// toClient writes msg to the client.
func (f *Forwarder) toClient(msg jsonrpc.Message) {
	if f.broken {
		return
	}
	if err := f.client.Write(context.Background(), msg); err != nil {
		f.log.Info("attach: the client's output failed; stopping", "err", err)
		f.broken = true
	}
}

func (f *Forwarder) ordered() []*call {
	cs := make([]*call, 0, len(f.calls))
	for _, c := range f.calls {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(x, y *call) int { return int(x.seq - y.seq) })
	return cs
}

func (a *attachment) send(c *call) {
	c.sent = true
	a.write(c.req)
}

// fromClient handles one message of the client's.
func (a *attachment) fromClient(msg jsonrpc.Message) {
	f := a.f
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			f.track(m)
			f.seq++
			c := &call{req: m, seq: f.seq}
			f.calls[m.ID] = c
			a.send(c)
			return
		}
		switch m.Method {
		case "notifications/initialized":
			f.initialized = true
		case "notifications/cancelled":
			id, ok := cancelledID(m)
			c, known := f.calls[id]
			if !ok || !known {
				return // answered already, or answered for the last writer
			}
			delete(f.calls, id) // the client expects no answer now
			if !c.sent {
				return // never sent: cancelled here
			}
		}
		a.write(m)
	case *jsonrpc.Response:
		sr, ok := f.serverReqs[m.ID]
		if !ok {
			return
		}
		delete(f.serverReqs, m.ID)
		if sr.gen != f.gen {
			return // asked by a writer that is gone
		}
		delete(f.serverIDs, sr.id)
		a.write(&jsonrpc.Response{ID: sr.id, Result: m.Result, Error: m.Error})
	}
}

// track records what a replay needs from a call of the client's.
func (f *Forwarder) track(req *jsonrpc.Request) {
	switch req.Method {
	case "logging/setLevel":
		f.logLevel = req.Params
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(req.Params, &p) != nil {
			return
		}
		if i := slices.Index(f.subURIs, p.URI); i >= 0 {
			f.subURIs = slices.Delete(f.subURIs, i, i+1)
			f.subs = slices.Delete(f.subs, i, i+1)
		}
		if req.Method == "resources/subscribe" {
			f.subURIs = append(f.subURIs, p.URI)
			f.subs = append(f.subs, req.Params)
		}
	}
}

// fromWriter handles one message of the writer's.
func (a *attachment) fromWriter(msg jsonrpc.Message) {
	f := a.f
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if f.swallow[m.ID] {
			delete(f.swallow, m.ID)
			if m.ID == a.initID {
				if m.Error != nil {
					a.initErr = m.Error
				}
				close(a.initDone)
				return
			}
			if m.Error != nil {
				f.log.Warn("attach: the writer refused part of the replayed session", "id", m.ID.Raw(), "err", m.Error)
			}
			return
		}
		c, ok := f.calls[m.ID]
		if !ok {
			return // answered already, by this forwarder, for a writer that went
		}
		delete(f.calls, m.ID)
		if c.req.Method == "initialize" && m.Error == nil {
			f.init = c.req
		}
		f.toClient(m)
	case *jsonrpc.Request:
		if m.IsCall() {
			f.nextID++
			ours, _ := jsonrpc.MakeID(float64(f.nextID))
			f.serverReqs[ours] = serverReq{gen: f.gen, id: m.ID}
			f.serverIDs[m.ID] = ours
			f.toClient(&jsonrpc.Request{ID: ours, Method: m.Method, Params: m.Params})
			return
		}
		switch m.Method {
		case methodHandover:
			var p handoverParams
			a.goodbye = map[jsonrpc.ID]bool{}
			if json.Unmarshal(m.Params, &p) == nil {
				for _, raw := range p.Unanswered {
					if id, err := jsonrpc.MakeID(raw); err == nil {
						a.goodbye[id] = true
					}
				}
			}
			return
		case "notifications/cancelled":
			if id, ok := cancelledID(m); ok {
				if ours, ok := f.serverIDs[id]; ok {
					f.toClient(cancelled(ours, "cancelled by the server"))
				}
				return
			}
		}
		f.toClient(m)
	}
}

// lost handles the writer's going: each call sent to it is sent again to
// the next writer if the writer said it never read it, or if its method is
// free of effects; any other gets an error saying its outcome is unknown.
// The writer's own requests to the client are cancelled.
func (a *attachment) lost() error {
	f := a.f
	clean := a.goodbye != nil
	for _, c := range f.ordered() {
		if !c.sent {
			continue
		}
		c.sent = false
		if clean && !a.goodbye[c.req.ID] || safe(c.req.Method) {
			continue // sent again to the next writer
		}
		delete(f.calls, c.req.ID)
		f.toClient(f.unknown(c.req))
	}
	for ours, sr := range f.serverReqs {
		if sr.gen == f.gen {
			delete(f.serverReqs, ours)
			f.toClient(cancelled(ours, "the server process that asked stopped"))
		}
	}
	f.log.Info("attach: the writer went away", "pid", f.writerPID, "handed_over", clean, "calls_to_send_again", len(f.calls))
	return &WriterGoneError{PID: f.writerPID, Clean: clean}
}

// unknown is the answer to a call that was in flight when its writer went.
func (f *Forwarder) unknown(req *jsonrpc.Request) *jsonrpc.Response {
	what := req.Method + " request"
	data := map[string]any{"outcome": "unknown", "method": req.Method, "writer_pid": f.writerPID}
	if req.Method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(req.Params, &p) == nil && p.Name != "" {
			what = fmt.Sprintf("call of tool %q", p.Name)
			data["tool"] = p.Name
		}
	}
	msg := fmt.Sprintf("outcome unknown: the server process that was running this %s (pid %d) stopped before it answered, "+
		"so it may or may not have taken effect; another process takes over, so new requests work", what, f.writerPID)
	if f.opts.Check != "" {
		msg += ". Check " + f.opts.Check + " before sending it again"
	}
	raw, _ := json.Marshal(data)
	return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: CodeOutcomeUnknown, Message: msg, Data: raw}}
}

// Close stops reading the client and answers each call still waiting: one
// that may have run with CodeOutcomeUnknown, any other with an error
// saying it had no effect. Call it once Attach will not be called again.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	f.ended = true
	for _, c := range f.ordered() {
		if c.sent && !safe(c.req.Method) {
			f.toClient(f.unknown(c.req))
		} else {
			f.toClient(&jsonrpc.Response{ID: c.req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "no answer: the server stopped before it answered this request, which had no effect; send it again"}})
		}
		delete(f.calls, c.req.ID)
	}
	f.mu.Unlock()
	err := f.client.Close()
	<-f.readerDone
	return err
}

// safe reports whether a request of method may be sent to a second writer
// after the first may have read it: it changes nothing on the server (the
// reads of MCP, and the session set-up a replay redoes anyway). Any other
// method, tools/call first, may have had an effect.
func safe(method string) bool {
	switch method {
	case "initialize", "ping", "server/discover", "subscriptions/listen",
		"tools/list", "prompts/list", "prompts/get", "resources/list", "resources/templates/list",
		"resources/read", "resources/subscribe", "resources/unsubscribe", "logging/setLevel", "completion/complete":
		return true
	}
	return false
}

// cancelledID returns the requestId of a notifications/cancelled.
func cancelledID(m *jsonrpc.Request) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.RequestID == nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil
}

// cancelled is a notifications/cancelled for the client's request id.
func cancelled(id jsonrpc.ID, reason string) *jsonrpc.Request {
	raw, _ := json.Marshal(map[string]any{"requestId": id.Raw(), "reason": reason})
	return &jsonrpc.Request{Method: "notifications/cancelled", Params: raw}
}
