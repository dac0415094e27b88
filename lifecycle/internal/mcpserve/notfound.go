package mcpserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/rpcerr"
)

// notFoundWriter turns the go-sdk's answer to a request of a method it
// does not serve, before 2026-07-28 400 and the plain text `JSON RPC not
// handled: "x" unsupported`, into the JSON-RPC 2.0 Method not found error
// (-32601) with the request's id, which a client library can read; for a
// batch (2025-03-26), which the go-sdk then refuses whole before running
// any of it, into a batch of errors, one per request: Method not found
// for each request of that method, Invalid Request (-32600), saying it did
// not run, for the others. It holds back any plain-text 400 until finish;
// every other answer passes through untouched.
type notFoundWriter struct {
	http.ResponseWriter
	held bool // a plain-text 400 is held back
	body bytes.Buffer
}

// notHandled begins the go-sdk's answer to a request of a method it does
// not serve (jsonrpc2.ErrNotHandled).
var notHandled = []byte("JSON RPC not handled")

func (n *notFoundWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && strings.HasPrefix(n.Header().Get("Content-Type"), "text/plain") {
		n.held = true
		return
	}
	n.ResponseWriter.WriteHeader(code)
}

func (n *notFoundWriter) Write(p []byte) (int, error) {
	if n.held {
		return n.body.Write(p)
	}
	return n.ResponseWriter.Write(p)
}

func (n *notFoundWriter) Unwrap() http.ResponseWriter { return n.ResponseWriter }

func (n *notFoundWriter) Flush() {
	if !n.held {
		_ = http.NewResponseController(n.ResponseWriter).Flush()
	}
}

// finish sends a held answer: the Method not found error (or a batch of
// errors) if it was one, else the answer as the go-sdk wrote it. data is
// the request.
func (n *notFoundWriter) finish(data []byte) {
	if !n.held {
		return
	}
	name, ok := unsupported(n.body.Bytes())
	if !ok {
		n.ResponseWriter.WriteHeader(http.StatusBadRequest)
		n.ResponseWriter.Write(n.body.Bytes())
		return
	}
	n.Header().Del("X-Content-Type-Options")
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		n.batchNotFound(data, name)
		return
	}
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(data, &msg)
	writeRPCError(n.ResponseWriter, http.StatusBadRequest, msg.ID, jsonrpc.CodeMethodNotFound,
		fmt.Sprintf("method not found: this server does not serve %q", name))
}

// batchNotFound answers a batch the go-sdk refused for a message of
// method name: an error for each request in it, none of which ran.
func (n *notFoundWriter) batchNotFound(data []byte, name string) {
	notFound := fmt.Sprintf("method not found: this server does not serve %q; no message of this batch was run", name)
	notRun := fmt.Sprintf("not run: this batch also holds a message of %q, a method this server does not serve, "+
		"and a batch with one is refused whole: send the other messages again without it", name)
	var msgs []json.RawMessage
	_ = json.Unmarshal(data, &msgs)
	var out []rpcerr.Response
	for _, m := range msgs {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(m, &req) != nil || req.Method == "" || len(req.ID) == 0 || string(req.ID) == "null" {
			continue // a notification or a response: nothing to answer
		}
		if req.Method == name {
			out = append(out, rpcerr.New(req.ID, jsonrpc.CodeMethodNotFound, notFound))
		} else {
			out = append(out, rpcerr.New(req.ID, jsonrpc.CodeInvalidRequest, notRun))
		}
	}
	body, err := json.Marshal(out)
	if len(out) == 0 || err != nil { // only notifications: one error says why none was run
		writeRPCError(n.ResponseWriter, http.StatusBadRequest, nil, jsonrpc.CodeMethodNotFound, notFound)
		return
	}
	n.Header().Set("Content-Type", "application/json")
	n.ResponseWriter.WriteHeader(http.StatusBadRequest)
	n.ResponseWriter.Write(body)
}

// unsupported returns the method the go-sdk's plain-text refusal body
// names (`JSON RPC not handled: "x" unsupported`), and whether it is one.
func unsupported(body []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(body, notHandled)
	if !ok {
		return "", false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 {
		return "", false
	}
	quoted, err := strconv.QuotedPrefix(string(rest[i:]))
	if err != nil {
		return "", false
	}
	name, err := strconv.Unquote(quoted)
	return name, err == nil
}
