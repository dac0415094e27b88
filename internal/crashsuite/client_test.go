package crashsuite_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// errGone reports a server whose stdout reached end-of-file or whose stdin
// no longer takes writes: it died or exited. In a crash suite that is the
// point of the exercise, not a failure.
var errGone = errors.New("server gone")

// rpc is an MCP client over a server's stdin and stdout: raw JSON-RPC, one
// message per line, as a stdio client speaks it. Every line the server
// writes must be a JSON-RPC message; a line that is not is a violation of
// invariant 6 (stdout belongs to the transport). A last line without its
// newline was torn by a kill and is ignored. An rpc is for one goroutine.
type rpc struct {
	w      io.WriteCloser
	r      *bufio.Reader
	nextID int64
	// early holds responses read while waiting for another id.
	early map[int64]*message
}

func newRPC(stdin io.WriteCloser, stdout io.Reader) *rpc {
	return &rpc{w: stdin, r: bufio.NewReader(stdout), nextID: 1, early: map[int64]*message{}}
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// toolResult is the result of tools/call.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured json.RawMessage `json:"structuredContent"`
}

// Text returns the text content, where helios puts an error's message.
func (r *toolResult) Text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func (c *rpc) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: write to stdin: %v", errGone, err)
	}
	return nil
}

// send writes a request and returns its id.
func (c *rpc) send(method string, params any) (int64, error) {
	id := c.nextID
	c.nextID++
	return id, c.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// read returns the next message the server wrote.
func (c *rpc) read() (*message, error) {
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: read stdout: %v", errGone, err)
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		return nil, fmt.Errorf("stdout line is not a JSON-RPC message: %q", bytes.TrimSpace(line))
	}
	return &m, nil
}

// response reads until the response to id arrives, keeping others for
// later, and skipping notifications.
func (c *rpc) response(id int64) (*message, error) {
	if m, ok := c.early[id]; ok {
		delete(c.early, id)
		return m, nil
	}
	for {
		m, err := c.read()
		if err != nil {
			return nil, err
		}
		got, ok := responseID(m)
		if !ok {
			continue // a notification or a request from the server
		}
		if got == id {
			return m, nil
		}
		c.early[got] = m
	}
}

// next returns the next response, whatever its id.
func (c *rpc) next() (int64, *message, error) {
	for id, m := range c.early {
		delete(c.early, id)
		return id, m, nil
	}
	for {
		m, err := c.read()
		if err != nil {
			return 0, nil, err
		}
		if id, ok := responseID(m); ok {
			return id, m, nil
		}
	}
}

func responseID(m *message) (int64, bool) {
	if m.Method != "" || len(m.ID) == 0 {
		return 0, false
	}
	var id int64
	if json.Unmarshal(m.ID, &id) != nil {
		return 0, false
	}
	return id, true
}

// initialize runs the MCP handshake.
func (c *rpc) initialize() error {
	id, err := c.send("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "crashsuite", "version": "v0"},
	})
	if err != nil {
		return err
	}
	m, err := c.response(id)
	if err != nil {
		return err
	}
	if m.Error != nil {
		return fmt.Errorf("initialize: JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
	}
	return c.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized", "params": map[string]any{}})
}

// sendTool sends a tools/call request and returns its id.
func (c *rpc) sendTool(name string, args any) (int64, error) {
	return c.send("tools/call", map[string]any{"name": name, "arguments": args})
}

// errOutcomeUnknown is the error of a call whose writer went while it ran
// (lifecycle.CodeOutcomeUnknown): it may or may not have taken effect.
var errOutcomeUnknown = errors.New("outcome unknown")

// toolResult decodes the response to a tools/call. A JSON-RPC error is an
// error: helios reports a failed tool as a result with isError. One with
// lifecycle.CodeOutcomeUnknown matches errOutcomeUnknown.
func decodeTool(m *message) (*toolResult, error) {
	if m.Error != nil && m.Error.Code == lifecycle.CodeOutcomeUnknown {
		return nil, fmt.Errorf("tools/call: %w: %s", errOutcomeUnknown, m.Error.Message)
	}
	if m.Error != nil {
		return nil, fmt.Errorf("tools/call: JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
	}
	var r toolResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		return nil, fmt.Errorf("tools/call: result %s: %w", m.Result, err)
	}
	return &r, nil
}

// call calls a tool and waits for its result.
func (c *rpc) call(name string, args any) (*toolResult, error) {
	id, err := c.sendTool(name, args)
	if err != nil {
		return nil, err
	}
	m, err := c.response(id)
	if err != nil {
		return nil, err
	}
	return decodeTool(m)
}

// drain reads and discards what the server writes until it is gone, still
// checking that every line is JSON-RPC.
func (c *rpc) drain() error {
	for {
		if _, err := c.read(); err != nil {
			if errors.Is(err, errGone) {
				return nil
			}
			return err
		}
	}
}
