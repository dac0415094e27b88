package lifecycle

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
)

func TestGrowStackPassesThrough(t *testing.T) {
	want := &mcp.CallToolResult{}
	wantErr := errors.New("tool failed")
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "get_persona"}}
	var gotMethod string
	var gotReq mcp.Request
	h := growStack(func(_ context.Context, method string, r mcp.Request) (mcp.Result, error) {
		gotMethod, gotReq = method, r
		return want, wantErr
	})
	res, err := h(t.Context(), "tools/call", req)
	assert.Same(t, want, res)
	assert.Same(t, wantErr, err)
	assert.Equal(t, "tools/call", gotMethod)
	assert.Same(t, req, gotReq)
}
