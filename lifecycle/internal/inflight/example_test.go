package inflight_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/inflight"
)

// A request sent twice with id 1 reaches the reader once; the second is
// answered with an error just after the first's answer.
func Example() {
	one, _ := jsonrpc.MakeID(float64(1))
	call := &jsonrpc.Request{ID: one, Method: "tools/call"}
	inner := &mcptest.Scripted{In: []jsonrpc.Message{call, call}} // id 1 twice
	c := inflight.Wrap(inner)
	ctx := context.Background()
	for {
		m, err := c.Read(ctx)
		if err != nil {
			break
		}
		fmt.Println("read", m.(*jsonrpc.Request).Method)
	}
	_ = c.Write(ctx, &jsonrpc.Response{ID: one, Result: json.RawMessage(`{}`)})
	for _, m := range inner.Written {
		r := m.(*jsonrpc.Response)
		fmt.Println("answered", r.ID.Raw(), r.Error != nil)
	}
	// Output:
	// read tools/call
	// answered 1 false
	// answered 1 true
}
