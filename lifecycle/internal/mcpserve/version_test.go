package mcpserve

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// initializeAt is an initialize request for protocol version v, id 0.
func initializeAt(v string) string {
	return rpc(0, "initialize", map[string]any{"protocolVersion": v, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "0"}})
}

// TestInitializeProtocolVersions: a client of an older protocol version,
// or of one the server does not know, is initialized, and tools/list then
// works. A seed project failed with clients of another version than its
// own.
func TestInitializeProtocolVersions(t *testing.T) {
	for _, tt := range mcptest.ProtocolVersions {
		t.Run("stdio/"+tt.Asked, func(t *testing.T) {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- Serve(t.Context(), testServer(), Options{Stdio: true, Stdin: inR, Stdout: outW})
				outW.Close()
			}()
			t.Cleanup(func() { inW.Close(); outR.Close() })
			// A Serve that never answers fails the read, not the package.
			hung := time.AfterFunc(failAfter, func() { outR.CloseWithError(errors.New("no answer within failAfter")) })
			defer hung.Stop()
			out := bufio.NewScanner(outR)
			read := func() rpcResponse {
				t.Helper()
				require.True(t, out.Scan(), "no answer on stdout: %v", out.Err())
				var msg rpcResponse
				require.NoError(t, json.Unmarshal(out.Bytes(), &msg), "%s", out.Bytes())
				require.Nil(t, msg.Error, "%s", out.Bytes())
				return msg
			}
			write := func(line string) {
				t.Helper()
				_, err := io.WriteString(inW, line)
				require.NoError(t, err)
			}

			write(initializeAt(tt.Asked))
			mcptest.CheckNegotiated(t, tt, read().Result)
			write(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
			write(rpc(1, "tools/list", map[string]any{}))
			list := read()
			assert.JSONEq(t, "1", string(list.ID))
			assert.Contains(t, string(list.Result), `"slow_echo"`)

			require.NoError(t, inW.Close())
			select {
			case err := <-done:
				assert.ErrorIs(t, err, ErrStdinClosed)
			case <-time.After(failAfter):
				t.Fatal("Serve did not return after stdin EOF")
			}
		})
	}
	for _, tt := range mcptest.ProtocolVersions {
		t.Run("http/"+tt.Asked, func(t *testing.T) {
			url, _, _ := startHTTP(t, "tok", nil)
			c := &rawClient{url: url, token: "tok"}
			resp, init := c.call(t, initializeAt(tt.Asked))
			require.Nil(t, init.Error)
			c.session = resp.Header.Get("Mcp-Session-Id")
			require.NotEmpty(t, c.session)
			// A client sends the version it agreed to in a header from
			// 2025-06-18 on; an older client sends none.
			if v := mcptest.CheckNegotiated(t, tt, init.Result); v >= "2025-06-18" {
				c.version = v
			}
			accepted, body := c.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			assert.Equal(t, http.StatusAccepted, accepted.StatusCode, "%s", body)
			_, list := c.call(t, rpc(1, "tools/list", map[string]any{}))
			require.Nil(t, list.Error)
			assert.Contains(t, string(list.Result), `"slow_echo"`)
		})
	}
}
