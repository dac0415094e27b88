//go:build unix

package attach

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

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

// send writes c to the writer. A call whose write failed never reached
// it, and waits for the next writer.
func (a *attachment) send(c *call) {
	c.sent = a.write(c.req)
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
			if !f.broken {
				// Its id is free, and a request that reused it is owed
				// the answer it would have had after this one's.
				if err := f.client.Drop(context.Background(), id); err != nil {
					f.log.Info("attach: the client's output failed; stopping", "err", err)
					f.broken = true
				}
			}
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
		if m.Error == nil && f.initAt.IsZero() {
			f.initAt = time.Now().UTC()
		}
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
// The writer's own requests to the client are cancelled. It is called
// with the Forwarder's lock held.
func (a *attachment) lost() error {
	f := a.f
	// From here on the client's messages wait for the next writer: one
	// handled for this one now would be written to a closed connection
	// and count as sent, and never be answered.
	a.live = false
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
