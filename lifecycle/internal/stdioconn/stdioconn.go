// Package stdioconn is the transport of a client on stdio (newline
// delimited JSON-RPC, one message per line) that answers a bad line and
// goes on reading, where go-sdk's mcp.IOTransport ends the session: its
// json.Decoder stops at the first line that is not JSON, and its jsonrpc2
// connection stops reading at the first error Read returns (v1.8.0,
// mcp/transport.go and internal/jsonrpc2/conn.go), so one bad line lost
// the requests sent after it and, at EOF, those still queued before it.
//
// It is go-sdk's IOTransport over a line filter. The filter hands the
// IOTransport only lines that parse as JSON-RPC messages, and answers the
// others itself, on the same stdout (one Write call per message, under one
// mutex, as the IOTransport writes its own): a line that is not JSON gets a
// Parse error (-32700) with "id": null; JSON that is not a JSON-RPC
// message gets Invalid Request (-32600) with its id when it has a string or
// number one, else null; a batch that is empty, holds such a value or uses
// an id twice gets one Invalid Request with "id": null, and nothing in it
// is run; a line longer than the limit gets Invalid Request and is skipped
// without being held in memory. Blank lines are skipped. What IOTransport's
// Read still refuses of a line that passed (a batch in a protocol version
// that forbids batches, an id of an earlier batch still in progress) gets
// Invalid Request with "id": null, and Read goes on. Each answered line is
// logged once at Info with fault=client and the first bytes of the line.
//
// It does not answer a message spread over several lines (MCP forbids
// newlines inside a message): each line is a Parse error.
package stdioconn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport is an mcp.Transport over a stdio client's stream. Reader and
// Writer must be set; the rest may be left zero.
type Transport struct {
	// Reader is the client's input (stdin). Connect fails without it.
	Reader io.Reader
	// Writer is where messages to the client go (stdout). Connect fails
	// without it.
	Writer io.Writer
	// MaxLineLength bounds a line, in bytes without its newline; a longer
	// one is answered and skipped. 0 means mcp.DefaultMaxLineLength.
	MaxLineLength int
	// Logger gets one Info line per bad line answered; nil means discard.
	Logger *slog.Logger
}

// Connect returns the connection. Reading it never ends on a bad line,
// only at stdin's EOF, on an error reading stdin, or when it is closed.
// Closing it closes neither Reader nor Writer.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	if t.Reader == nil || t.Writer == nil {
		return nil, errors.New("stdioconn: Transport needs a Reader and a Writer")
	}
	limit := t.MaxLineLength
	if limit <= 0 {
		limit = mcp.DefaultMaxLineLength
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &lockedWriter{w: t.Writer}
	f := newFilter(t.Reader, w, log, limit)
	// The filter bounds each line, so the IOTransport need not: -1 keeps
	// its own limit from counting the bytes of lines it never sees.
	inner, err := (&mcp.IOTransport{Reader: io.NopCloser(f), Writer: nopWriteCloser{w}, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{Connection: inner, f: f}, nil
}

// conn answers what the IOTransport's Read refuses of a line the filter
// passed, and reads on.
type conn struct {
	mcp.Connection
	f *filter
}

func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err == nil || c.ends(ctx, err) {
			return msg, err
		}
		// Read received one line and refused it (v1.8.0's ioConn.Read
		// after readBatch): each turn of this loop consumed a line, so it
		// cannot spin.
		c.f.answer(jsonrpc.CodeInvalidRequest, nil, "Invalid Request: "+err.Error()+"; "+notRun(err), nil, err.Error())
	}
}

// ends reports whether err ends reading: the context's, stdin's end or
// error, or one of the decoder of IOTransport, which stops reading after
// it (v1.8.0: a syntax error, a value cut short, trailing data, none of
// which a line the filter passed can cause). Any other error is Read's
// refusal of one line.
func (c *conn) ends(ctx context.Context, err error) bool {
	var syntax *json.SyntaxError
	return ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		c.f.ended(err) || errors.As(err, &syntax) || strings.Contains(err.Error(), "trailing data")
}

// notRun says what of the refused line was not run. go-sdk v1.8.0's
// ioConn.Read queues the rest of a batch before it checks its ids (a
// duplicate in the batch, which the filter answers first, or an id of an
// earlier batch still in progress); every other refusal comes before that.
func notRun(err error) string {
	if s := err.Error(); strings.Contains(s, "previously seen") || strings.Contains(s, "duplicate message ID") {
		return "its first message was not run"
	}
	return "nothing in it was run"
}

// lockedWriter writes each message with one Write call under a mutex, so
// that the filter's answers and the IOTransport's messages never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
