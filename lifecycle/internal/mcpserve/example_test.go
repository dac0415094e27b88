package mcpserve_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
)

// Serve a server on stdio until stdin ends; every request read before the
// end is answered.
func ExampleServe() {
	server := mcp.NewServer(&mcp.Implementation{Name: "demo", Version: "v0"}, nil)
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	var out strings.Builder
	err := mcpserve.Serve(context.Background(), server, mcpserve.Options{Stdio: true, Stdin: in, Stdout: &out})
	fmt.Println(err == mcpserve.ErrStdinClosed, strings.Contains(out.String(), `"id":1`))
	// Output: true true
}
