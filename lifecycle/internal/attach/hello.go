//go:build unix

package attach

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// ProtocolVersion is the version of the attach protocol (the hellos, then
// JSON-RPC), in every Hello.
const ProtocolVersion = 1

// HelloTimeout bounds the exchange of hellos on a new connection.
const HelloTimeout = 5 * time.Second

// maxHello bounds a hello line.
const maxHello = 4096

// Hello is the first line each end of a connection sends: the forwarder
// first, then the writer.
type Hello struct {
	Attach  int       `json:"attach"`            // ProtocolVersion
	PID     int       `json:"pid"`               // the sender's process
	Name    string    `json:"name,omitempty"`    // the server's name
	Version string    `json:"version,omitempty"` // the sender's server version
	Toolkit string    `json:"toolkit,omitempty"` // the sender's mcpkeep version
	Since   time.Time `json:"since,omitzero"`    // forwarder: when it began serving its client
	Refused string    `json:"refused,omitempty"` // writer: why it does not take this process
}

// OtherServer returns why a process serving the server named attaching
// may not attach to a writer serving the server named writer, or "" when
// it may: a home holds one server's files, and a client launched for one
// server must not be served another's tools. A name left empty (an older
// mcpkeep's hello) is not judged.
func OtherServer(attaching, writer string) string {
	if attaching == "" || writer == "" || attaching == writer {
		return ""
	}
	return fmt.Sprintf("it serves %q and the home's writer serves %q: a home holds one server's files; give %q a home of its own",
		attaching, writer, attaching)
}

// ErrRefused: the writer does not take this process.
var ErrRefused = errors.New("attach: the writer refused this process")

// RefusedError is the writer's refusal, with its reason.
type RefusedError struct {
	PID    int    // the writer
	Reason string // what the writer said
}

// Error says who refused and why.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("attach: the writer (pid %d) refused this process: %s", e.PID, e.Reason)
}

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Conn is a forwarder's connection to the writer, past the hellos. Pass it
// to Forwarder.Attach.
type Conn struct {
	Writer Hello // what the writer said of itself
	c      *net.UnixConn
	r      *bufio.Reader
}

// Read reads JSON-RPC from the writer.
func (c *Conn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Write writes JSON-RPC to the writer.
func (c *Conn) Write(p []byte) (int, error) { return c.c.Write(p) }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Dial connects to the writer listening at path, checks that it runs as
// this user, and exchanges hellos: me is what this process says of itself.
// A missing or stale socket gives an error matching ErrNoWriter; a writer
// that does not take this process a *RefusedError. The end of ctx ends the
// hello too, for a writer that takes the connection and never answers.
func Dial(ctx context.Context, path string, me Hello) (*Conn, error) {
	uc, err := dial(ctx, path)
	if err != nil {
		return nil, err
	}
	c := &Conn{c: uc, r: bufio.NewReader(uc)}
	if err := c.hello(ctx, me); err != nil {
		uc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) hello(ctx context.Context, me Hello) (err error) {
	if err := failpoint.Hit("attach.before-hello"); err != nil {
		return err
	}
	c.c.SetDeadline(time.Now().Add(HelloTimeout))
	defer c.c.SetDeadline(time.Time{})
	// ctx's end moves the deadline to the past. Once that may have run,
	// the deadline cannot be trusted, and ctx's error is the answer.
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() && ctx.Err() != nil {
			err = ctx.Err()
		}
	}()
	me.Attach = ProtocolVersion
	if err := writeHello(c.c, me); err != nil {
		return fmt.Errorf("%w: hello: %w", ErrNoWriter, err)
	}
	w, err := readHello(c.r)
	if err != nil {
		// A writer that closes at once is leaving: it handed over.
		return fmt.Errorf("%w: hello: %w", ErrNoWriter, err)
	}
	if w.Refused != "" {
		return &RefusedError{PID: w.PID, Reason: w.Refused}
	}
	c.Writer = w
	return nil
}

func writeHello(w io.Writer, h Hello) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readHello reads one hello line, at most maxHello bytes.
func readHello(r *bufio.Reader) (Hello, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHello {
			return Hello{}, fmt.Errorf("hello longer than %d bytes", maxHello)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return Hello{}, err
		}
	}
	var h Hello
	if err := json.Unmarshal(line, &h); err != nil {
		return Hello{}, fmt.Errorf("hello is not JSON: %w", err)
	}
	if h.Attach < 1 {
		return Hello{}, fmt.Errorf("not an attach hello: %.80q", line)
	}
	return h, nil
}
