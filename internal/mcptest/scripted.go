package mcptest

import (
	"context"
	"io"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Scripted is an mcp.Connection for tests: Read returns the messages In
// holds, in order, then io.EOF, and Write appends to Written. It is not
// safe for concurrent use.
type Scripted struct {
	In      []jsonrpc.Message // what Read returns, the next first
	Written []jsonrpc.Message // what Write was given, in order
}

var _ mcp.Connection = (*Scripted)(nil)

// Read returns the next message of In, or io.EOF once none is left.
func (s *Scripted) Read(context.Context) (jsonrpc.Message, error) {
	if len(s.In) == 0 {
		return nil, io.EOF
	}
	m := s.In[0]
	s.In = s.In[1:]
	return m, nil
}

// Write appends m to Written.
func (s *Scripted) Write(_ context.Context, m jsonrpc.Message) error {
	s.Written = append(s.Written, m)
	return nil
}

// Close does nothing.
func (s *Scripted) Close() error { return nil }

// SessionID is empty.
func (s *Scripted) SessionID() string { return "" }
