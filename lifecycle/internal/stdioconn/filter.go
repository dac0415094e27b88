package stdioconn

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/rpcerr"
)

// excerptLen is how many bytes of a bad line its log line quotes.
const excerptLen = 48

// keepCap is the largest line buffer kept for the next line; a larger
// one, grown for a long line, is let go.
const keepCap = 1 << 20

// filter is the io.Reader the IOTransport decodes: stdin, line by line,
// with every line that is not a JSON-RPC message (or a batch of them)
// answered and left out. A passed line is handed on trimmed of blanks and
// ended with one '\n', so the decoder takes it whole and never fails.
// Read runs on the IOTransport's reading goroutine; only ended and answer
// may be called from others.
type filter struct {
	r     *bufio.Reader
	w     io.Writer // shared with the IOTransport's writes
	log   *slog.Logger
	limit int

	buf []byte // a line that did not fit in r's buffer
	out []byte // the rest of the passed line to hand on
	nl  bool   // out is still to be followed by its '\n'

	mu  sync.Mutex
	err error // stdin's error, io.EOF at its end: set once all lines were read
}

func newFilter(r io.Reader, w io.Writer, log *slog.Logger, limit int) *filter {
	return &filter{r: bufio.NewReaderSize(r, 64<<10), w: w, log: log, limit: limit}
}

// Read hands on the passed lines, then stdin's error.
func (f *filter) Read(p []byte) (int, error) {
	for len(f.out) == 0 && !f.nl {
		if err := f.endErr(); err != nil {
			return 0, err
		}
		line, err := f.next()
		if v := f.check(line); v != nil {
			f.out, f.nl = v, true
		}
		if err != nil {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if len(f.out) == 0 && f.nl && n < len(p) {
		p[n] = '\n'
		n++
		f.nl = false
	}
	return n, nil
}

func (f *filter) endErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// ended reports whether err is the error that ended stdin.
func (f *filter) ended(err error) bool {
	end := f.endErr()
	return end != nil && errors.Is(err, end)
}

// next returns the next line without its '\n', and stdin's error once no
// byte is left after it. A line longer than the limit is answered and
// skipped, a piece at a time. The line is valid until the next call.
func (f *filter) next() ([]byte, error) {
	if cap(f.buf) > keepCap {
		f.buf = nil
	}
	f.buf = f.buf[:0]
	n := 0          // the line's length so far
	long := false   // n passed the limit
	var head []byte // the start of a line too long, for its answer
	for {
		chunk, err := f.r.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		n += len(chunk)
		var line []byte
		switch {
		case long:
		case n > f.limit:
			long = true
			start := f.buf
			if len(start) == 0 {
				start = chunk
			}
			head = bytes.Clone(start[:min(len(start), excerptLen)])
			f.buf = f.buf[:0]
		case len(f.buf) == 0 && !errors.Is(err, bufio.ErrBufferFull):
			line = chunk // whole in r's buffer: no copy
		default:
			f.buf = append(f.buf, chunk...)
			line = f.buf
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !long {
			return line, err
		}
		f.answer(jsonrpc.CodeInvalidRequest, nil,
			fmt.Sprintf("Invalid Request: a line of more than %d bytes; it was skipped unread", f.limit),
			head, fmt.Sprintf("line of %d bytes or more", n))
		if err != nil {
			return nil, err
		}
		n, long, head = 0, false, nil
	}
}

// check returns line's message trimmed of blanks, or nil when the line
// is blank or was answered.
func (f *filter) check(line []byte) []byte {
	v := bytes.Trim(line, " \t\r")
	if len(v) == 0 {
		return nil
	}
	var o map[string]json.RawMessage
	err := json.Unmarshal(v, &o)
	if syntax := (*json.SyntaxError)(nil); errors.As(err, &syntax) {
		f.answer(jsonrpc.CodeParseError, nil, "Parse error: "+err.Error()+" (each message is one line of JSON)", v, err.Error())
		return nil
	}
	if v[0] == '[' {
		if reason := batchFault(v); reason != "" {
			f.answer(jsonrpc.CodeInvalidRequest, nil, "Invalid Request: "+reason+"; nothing in the batch was run", v, reason)
			return nil
		}
		return v
	}
	if reason := messageFault(v, o); reason != "" {
		f.answer(jsonrpc.CodeInvalidRequest, idOf(o), "Invalid Request: "+reason, v, reason)
		return nil
	}
	return v
}

// maxDepth is the deepest nesting of objects and arrays go-sdk v1.8.0
// decodes (internal/json).
const maxDepth = 1000

// messageFault says, in JSON-RPC's terms, why the JSON value v is not a
// message that jsonrpc.DecodeMessage takes, or "". o is v decoded, nil if
// v is not an object. What a look at o's fields settles costs a fiftieth
// of DecodeMessage (go-sdk v1.8.0's allocates a 64 KiB buffer for each
// message); DecodeMessage decides the rest.
func messageFault(v []byte, o map[string]json.RawMessage) string {
	if o == nil {
		return "a JSON-RPC message is an object, and a batch an array of them"
	}
	id, method := o["id"], o["method"]
	switch {
	case string(o["jsonrpc"]) != `"2.0"`:
		// A "2.0" spelled with escapes is the one case DecodeMessage
		// takes: it decides.
	case id != nil && id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9') && string(id) != "null":
		return "the id must be a string or a number"
	case method != nil && method[0] != '"' && string(method) != "null":
		return "the method must be a string"
	case method == nil && (id == nil || string(id) == "null"):
		return "neither a request (it has no method) nor a response (it has no id)"
	case o["error"] == nil && bytes.Count(v, []byte("{"))+bytes.Count(v, []byte("[")) <= maxDepth:
		// A number id DecodeMessage cannot take (1e999) it refuses too.
		if id == nil || id[0] == '"' || string(id) == "null" || json.Unmarshal(id, new(float64)) == nil {
			return ""
		}
	}
	if _, err := jsonrpc.DecodeMessage(v); err != nil {
		if string(o["jsonrpc"]) != `"2.0"` && strings.Contains(err.Error(), "version tag") {
			return `"jsonrpc" must be "2.0"`
		}
		return err.Error()
	}
	return ""
}

// batchFault says what makes the JSON value v, an array, a batch that
// go-sdk v1.8.0's ioConn.Read would refuse, or "". Two requests with the
// same id, or two notifications (it keys a batch's requests by id, a
// notification's being none), are refused by it only once the batch is
// queued.
func batchFault(v []byte) string {
	var elems []json.RawMessage
	if err := json.Unmarshal(v, &elems); err != nil {
		return err.Error()
	}
	if len(elems) == 0 {
		return "an empty batch"
	}
	ids := make(map[jsonrpc.ID]bool, len(elems))
	for i, e := range elems {
		var o map[string]json.RawMessage
		_ = json.Unmarshal(e, &o) // nil unless an object: messageFault says so
		if reason := messageFault(e, o); reason != "" {
			return fmt.Sprintf("message %d of the batch: %s", i+1, reason)
		}
		if o["method"] == nil {
			continue // a response
		}
		var raw any
		_ = json.Unmarshal(o["id"], &raw)
		id, err := jsonrpc.MakeID(raw)
		if err != nil {
			return fmt.Sprintf("message %d of the batch: %v", i+1, err)
		}
		if ids[id] {
			if !id.IsValid() {
				return "a batch of more than one notification (send them on lines of their own)"
			}
			return fmt.Sprintf("id %v is used twice in the batch", id.Raw())
		}
		ids[id] = true
	}
	return ""
}

// idOf returns the id of the decoded object o when it is a string or a
// number, else nil.
func idOf(o map[string]json.RawMessage) json.RawMessage {
	id := o["id"]
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || '0' <= id[0] && id[0] <= '9') {
		return id
	}
	return nil
}

// answer writes an error response with id (nil for null) to the client
// and logs it with an excerpt of line.
func (f *filter) answer(code int64, id json.RawMessage, message string, line []byte, reason string) {
	b, err := rpcerr.Encode(id, code, message)
	if err != nil { // cannot happen: id is a JSON string, number or null
		return
	}
	// A failed write is the IOTransport's to see, on its own next one.
	_, _ = f.w.Write(append(b, '\n'))
	attrs := []any{"fault", "client", "code", code, "reason", reason}
	if line != nil {
		attrs = append(attrs, "excerpt", string(line[:min(len(line), excerptLen)]))
	}
	f.log.Info("stdio: answered a bad line from the client", attrs...)
}
