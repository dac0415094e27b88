package lifecycle

import (
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Route says which process an MCP client talks to. Every tool runs in the
// home's writer; a client launched on a home in use talks to a process
// attached to the writer, which forwards its messages.
type Route struct {
	Attached  bool // the client reaches the writer through another process
	PID       int  // the process the client talks to: the writer, or the attached process
	WriterPID int  // the writer, which runs the tools
}

// Route returns how the client of ss reaches the server: in a tool
// handler, pass req.Session. A client on the writer's own stdio or on
// HTTP, a nil ss, and any session outside a Harness report this process as
// both.
func (e *Env) Route(ss *mcp.ServerSession) Route {
	if e.route == nil {
		return Route{PID: os.Getpid(), WriterPID: os.Getpid()}
	}
	return e.route(ss)
}
