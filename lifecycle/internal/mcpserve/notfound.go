package mcpserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// notFoundWriter turns the go-sdk's answer to a single request of a
// method it does not serve, before 2026-07-28 400 and the plain text
// `JSON RPC not handled: "x" unsupported`, into the JSON-RPC 2.0 Method
// not found error (-32601) with the request's id, which a client library
// can read. It holds back any plain-text 400 until finish; every other
// answer passes through untouched.
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

// finish sends a held answer: the Method not found error if it was one,
// else the answer as the go-sdk wrote it. data is the request.
func (n *notFoundWriter) finish(data []byte) {
	if !n.held {
		return
	}
	if !bytes.HasPrefix(n.body.Bytes(), notHandled) {
		n.ResponseWriter.WriteHeader(http.StatusBadRequest)
		n.ResponseWriter.Write(n.body.Bytes())
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(data, &msg)
	n.Header().Del("X-Content-Type-Options")
	writeRPCError(n.ResponseWriter, http.StatusBadRequest, msg.ID, jsonrpc.CodeMethodNotFound,
		fmt.Sprintf("method not found: this server does not serve %q", msg.Method))
}
