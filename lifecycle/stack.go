package lifecycle

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// growStack is a receiving middleware that gives the goroutine handling a
// request the stack it will need before the request goes deep. The go-sdk
// handles each request on a goroutine of its own, which starts with a
// small stack (the runtime sizes new stacks by the average of all stacks,
// and a harness's idle goroutines keep that average low); the calls under
// a tools/call (schema validation, JSON decoding, the tool) then grow it
// in two or three steps, each copying a deep stack. Growing it once, here,
// copies a shallow one: it cut get_persona's CPU per call over HTTP
// (BENCHMARKS.md, issue 22).
func growStack(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		grow(len(method))
		return next(ctx, method, req)
	}
}

// stackReserve is the stack a request's goroutine is grown to hold at
// least; the runtime rounds its size up to a power of two.
const stackReserve = 24 << 10

// grow uses a stackReserve frame, which makes the runtime grow the stack
// to hold it. i keeps the compiler from removing the frame.
//
//go:noinline
func grow(i int) byte {
	var buf [stackReserve]byte
	buf[i%len(buf)] = 1
	return buf[(i+1)%len(buf)]
}
