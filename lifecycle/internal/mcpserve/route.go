package mcpserve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/rpcerr"
)

const (
	sessionHeader = "Mcp-Session-Id"
	versionHeader = "Mcp-Protocol-Version"
	// firstVersionWithoutBatches is the first protocol version that has no
	// JSON-RPC batches; a request without the version header is taken as
	// 2025-03-26, which has them.
	firstVersionWithoutBatches = "2025-06-18"
	defaultHeaderVersion       = "2025-03-26"
	// retryAfter is the Retry-After, in seconds, of an initialize refused
	// because every session is busy.
	retryAfter = 5
)

// serveMCP routes a request at /mcp to the go-sdk handler that serves its
// kind of client: the one with sessions for initialize-era clients, the
// stateless one for 2026-07-28 clients (Options.Mode). It reads a POST's
// body first, bounded in size and time, refuses batches the protocol
// version forbids before reading them, and keeps the session table.
func (h *httpServer) serveMCP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(sessionHeader)
	if h.opts.Mode == ModeStateless {
		if r.Method == http.MethodPost {
			h.servePOST(w, r, nil)
			return
		}
		h.stateless.ServeHTTP(w, r)
		return
	}
	if id == "" {
		if r.Method == http.MethodPost {
			h.servePOST(w, r, nil)
		} else if h.opts.Mode == ModeBoth && r.Header.Get(versionHeader) >= firstStatelessVersion {
			h.stateless.ServeHTTP(w, r) // 405: no event stream without a session
		} else {
			h.stateful.ServeHTTP(w, r) // 400: a GET or DELETE needs a session
		}
		return
	}
	s := h.sessions.acquire(id)
	if s == nil {
		// Not live: the go-sdk answers 404, and the client initializes
		// again; servePOST first answers a body that is not JSON.
		if r.Method == http.MethodPost {
			h.servePOST(w, r, nil)
		} else {
			h.stateful.ServeHTTP(w, r)
		}
		return
	}
	defer h.sessions.release(s)
	if r.Method == http.MethodPost {
		h.servePOST(w, r, s)
		return
	}
	rec := &recorder{ResponseWriter: w}
	h.serveSession(rec, r, s)
	if r.Method == http.MethodDelete && rec.code() < 300 {
		h.sessions.drop(id)
	}
}

// serveSession serves a request of live session s: the session's version
// governs a request that does not say its own.
func (h *httpServer) serveSession(w *recorder, r *http.Request, s *session) {
	if r.Header.Get(versionHeader) == "" {
		r.Header.Set(versionHeader, s.version)
	}
	h.stateful.ServeHTTP(w, r)
	if w.code() == http.StatusNotFound {
		h.sessions.drop(s.id) // the go-sdk closed it
	}
}

// servePOST reads the body of a POST, of session s or of none, and serves it.
func (h *httpServer) servePOST(w http.ResponseWriter, r *http.Request, s *session) {
	postStarted()
	defer postDone()
	rc := http.NewResponseController(w)
	if d := h.limits.BodyReadTimeout; d > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(d))
	}
	version := r.Header.Get(versionHeader)
	if s != nil {
		version = s.version
	}
	if version == "" {
		version = defaultHeaderVersion
	}
	body := r.Body
	if h.limits.MaxBodyBytes > 0 {
		body = http.MaxBytesReader(w, body, h.limits.MaxBodyBytes)
	}
	br := bufio.NewReaderSize(body, 512)
	first, err := firstByte(br)
	if err != nil && !errors.Is(err, io.EOF) {
		h.bodyError(w, err)
		return
	}
	batch := first == '['
	if batch {
		switch {
		case version >= firstVersionWithoutBatches:
			h.refuseBatch(w, fmt.Sprintf("JSON-RPC batches are not part of protocol version %s (2025-06-18 removed them): send one message per POST", version))
			return
		case s == nil && h.opts.Mode != ModeStateless && r.Header.Get(sessionHeader) == "":
			h.refuseBatch(w, "a JSON-RPC batch must belong to a session: POST initialize on its own, then the batch with the Mcp-Session-Id it answered")
			return
		}
	}
	data, err := readAll(br, r.ContentLength, h.limits.MaxBodyBytes)
	if err != nil {
		h.bodyError(w, err)
		return
	}
	_ = rc.SetReadDeadline(time.Time{}) // an answer may stream for long: no deadline on the connection
	if !json.Valid(data) {
		// JSON-RPC 2.0 answers a body that does not parse with Parse
		// error, whatever its session: the go-sdk would answer plain
		// text, and serveFirst that the client must initialize.
		h.parseError(w, r, data)
		return
	}
	if batch {
		n, err := countBatch(data, h.limits.MaxBatch)
		switch {
		case err == nil && n == 0:
			// The go-sdk answers "malformed payload" in plain text;
			// JSON-RPC 2.0 wants an Invalid Request error.
			h.refuseBatch(w, "empty JSON-RPC batch: a batch must hold at least one message")
			return
		case err == nil && h.limits.MaxBatch > 0 && n > h.limits.MaxBatch:
			h.refuseBatch(w, fmt.Sprintf("this JSON-RPC batch has more than %d messages, the most the server takes in one POST", h.limits.MaxBatch))
			return
		}
		if h.limits.MaxBatchReplyBytes > 0 {
			w = &cappedWriter{ResponseWriter: w, left: h.limits.MaxBatchReplyBytes, stats: h.stats}
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	if !batch && bytes.Contains(data, []byte(`"subscriptions/listen"`)) && method(data) == "subscriptions/listen" {
		notACall(r)
	}
	nf := &notFoundWriter{ResponseWriter: w}
	defer nf.finish(data)
	w = nf

	switch {
	case h.opts.Mode == ModeStateless:
		h.stateless.ServeHTTP(w, r)
	case s != nil:
		h.serveSession(&recorder{ResponseWriter: w}, r, s)
	case r.Header.Get(sessionHeader) != "":
		h.stateful.ServeHTTP(w, r) // not live: 404
	default:
		h.serveFirst(w, r, data)
	}
}

// serveFirst serves a POST without a session: an initialize opens one;
// a 2026-07-28 request, or server/discover, goes to the stateless handler
// (unless Mode is ModeSessions, where the go-sdk answers with the versions
// it serves with sessions); any other request or notification gets 400
// and a JSON-RPC error saying to initialize first, and opens no session.
func (h *httpServer) serveFirst(w http.ResponseWriter, r *http.Request, data []byte) {
	if r.Header.Get(versionHeader) >= firstStatelessVersion {
		if h.opts.Mode == ModeBoth {
			h.stateless.ServeHTTP(w, r)
		} else {
			h.stateful.ServeHTTP(w, r)
		}
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string                     `json:"protocolVersion"`
			Meta            map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	_ = json.Unmarshal(data, &msg) // JSON, but maybe not a message: refused below
	_, newProtocol := msg.Params.Meta[mcp.MetaKeyProtocolVersion]
	switch {
	case msg.Method == "initialize":
		h.serveInitialize(w, r, msg.Params.ProtocolVersion)
	case h.opts.Mode == ModeBoth && (msg.Method == "server/discover" || newProtocol):
		h.stateless.ServeHTTP(w, r)
	case newProtocol:
		h.stateful.ServeHTTP(w, r) // ModeSessions: the go-sdk answers with the versions it serves
	default:
		// The go-sdk would open a session for it and answer, with 200,
		// that the method is invalid before initialize. The spec (Streamable
		// HTTP, "Session Management") wants 400 for a request without the
		// session ID a server requires.
		h.log.Debug("HTTP request without a session refused", "method", msg.Method, "remote", r.RemoteAddr)
		writeRPCError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest,
			"this server serves initialize-era clients with sessions: send initialize first, "+
				"then put the Mcp-Session-Id it returned on every request")
	}
}

// serveInitialize opens a session if the session table has room for it.
func (h *httpServer) serveInitialize(w http.ResponseWriter, r *http.Request, asked string) {
	if !h.sessions.reserve() {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		http.Error(w, fmt.Sprintf("every one of the server's %d HTTP sessions is busy; try again in %d seconds", h.limits.MaxSessions, retryAfter),
			http.StatusServiceUnavailable)
		return
	}
	// The session goes into the table when the go-sdk sends the answer's
	// header, before the client can read it and send the session's next
	// request (or ask /healthz), not once the handler has returned.
	added := false
	open := func(code int) {
		if id := w.Header().Get(sessionHeader); id != "" && code == http.StatusOK && !added {
			added = true
			h.sessions.add(id, Negotiated(asked))
		}
	}
	rec := &recorder{ResponseWriter: w, onHeader: open}
	h.stateful.ServeHTTP(rec, r)
	open(rec.code()) // a handler that wrote nothing
	if !added {
		h.sessions.unreserve()
	}
}

// closeSession closes the go-sdk's session id the way a client's DELETE
// does: the go-sdk offers no other way to close a session by its ID.
func (h *httpServer) closeSession(id string) {
	req, err := http.NewRequest(http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	req.Header.Set(sessionHeader, id)
	h.stateful.ServeHTTP(&discard{header: http.Header{}}, req)
}

// method returns the method of the JSON-RPC message data, "" if it has
// none.
func method(data []byte) string {
	var msg struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(data, &msg)
	return msg.Method
}

// firstByte returns the first byte of br that is not JSON whitespace,
// leaving it unread.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b, br.UnreadByte()
	}
}

// readAll reads r to the end; size, the Content-Length if known, sizes the
// buffer at once.
func readAll(r io.Reader, size, limit int64) ([]byte, error) {
	if size < 0 || (limit > 0 && size > limit) {
		size = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// countBatch counts the messages of a JSON array, reading no further
// than one past max (when max > 0).
func countBatch(data []byte, max int) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return 0, err
	}
	n := 0
	for dec.More() {
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return n, err
		}
		n++
		if max > 0 && n > max {
			break
		}
	}
	return n, nil
}

// bodyError answers a POST whose body could not be read: too large, too
// slow, or cut off.
func (h *httpServer) bodyError(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes, the most the server reads", tooLarge.Limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		refuse(w, http.StatusRequestTimeout, fmt.Sprintf("request body not received within %s", h.limits.BodyReadTimeout))
	default:
		refuse(w, http.StatusBadRequest, "request body could not be read: "+err.Error())
	}
}

// parseError answers a POST whose body data is not JSON with the JSON-RPC
// Parse error, "id": null and 400.
func (h *httpServer) parseError(w http.ResponseWriter, r *http.Request, data []byte) {
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	if err == nil { // json.Valid and Unmarshal disagree: say no more
		err = errors.New("invalid JSON")
	}
	h.log.Debug("HTTP body is not JSON", "err", err, "remote", r.RemoteAddr)
	writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError,
		"the request body is not JSON ("+err.Error()+"): send one JSON-RPC message, or a batch of them, as JSON")
}

// refuseBatch answers a batch with a JSON-RPC error, without reading the
// rest of it.
func (h *httpServer) refuseBatch(w http.ResponseWriter, msg string) {
	h.stats.batches.Add(1)
	h.log.Debug("HTTP batch refused", "reason", msg)
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refuseGrace))
	writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, msg)
}

// writeRPCError answers with status and a JSON-RPC error response to the
// request whose id is id, as it appeared in the request. JSON-RPC 2.0
// wants "id": null when the request's id is not known (a batch's, a
// notification's, a message that could not be read); jsonrpc.EncodeMessage
// would leave it out.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	data, err := rpcerr.Encode(id, code, msg)
	if err != nil {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

// recorder remembers the status a handler answered with.
type recorder struct {
	http.ResponseWriter
	status int
	// onHeader, if set, is called with the status just before the header
	// is sent.
	onHeader func(code int)
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		if r.onHeader != nil {
			r.onHeader(code)
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(p)
}

// code is the status answered, 200 if the handler wrote nothing.
func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK) // a flush sends the header
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// errReplyTooLarge is what a batch's answer gets once it reaches
// MaxBatchReplyBytes: the go-sdk drops the rest of it.
var errReplyTooLarge = errors.New("mcpserve: the answer to a batch exceeds the limit")

// cappedWriter passes at most left bytes, in whole writes.
type cappedWriter struct {
	http.ResponseWriter
	left  int64
	over  bool
	stats *Stats
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.over || int64(len(p)) > c.left {
		if !c.over {
			c.over = true
			c.stats.batches.Add(1)
		}
		return 0, errReplyTooLarge
	}
	c.left -= int64(len(p))
	return c.ResponseWriter.Write(p)
}

func (c *cappedWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *cappedWriter) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// discard is a ResponseWriter that keeps nothing.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
