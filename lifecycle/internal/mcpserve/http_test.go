package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// rawClient sends raw JSON-RPC messages over Streamable HTTP, as a client
// of another SDK would, so that a test sees the status codes and bodies
// the go-sdk client hides.
type rawClient struct {
	url, token string
	session    string // Mcp-Session-Id, once initialized
	version    string // Mcp-Protocol-Version to send; "" sends none
}

// request returns a POST of body with the client's headers.
func (c *rawClient) request(t *testing.T, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	return req
}

// post POSTs body and returns the response with its body read.
func (c *rawClient) post(t *testing.T, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(c.request(t, body))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

// rpcResponse is a JSON-RPC response as a test reads it.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call POSTs a request and returns its JSON-RPC response, from a JSON body
// or from the first data line of an event stream; it fails t unless the
// status is 200.
func (c *rawClient) call(t *testing.T, body string) (*http.Response, rpcResponse) {
	t.Helper()
	resp, data := c.post(t, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	media, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	if media == "text/event-stream" {
		data = newEvents(bytes.NewReader(data)).next(t)
	}
	var msg rpcResponse
	require.NoError(t, json.Unmarshal(data, &msg), "%s", data)
	return resp, msg
}

// events reads the data of the events of an event stream.
type events struct{ sc *bufio.Scanner }

func newEvents(r io.Reader) *events { return &events{sc: bufio.NewScanner(r)} }

// next returns the data of the next event that has some, failing t at the
// end of the stream.
func (e *events) next(t *testing.T) []byte {
	t.Helper()
	for e.sc.Scan() {
		if d, ok := strings.CutPrefix(e.sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
			return []byte(d)
		}
	}
	require.NoError(t, e.sc.Err())
	require.FailNow(t, "the event stream ended with no more data")
	return nil
}

// TestHTTPAcceptsNotificationsAndResponses: a POST of a notification or of
// a response, no request in it, is accepted with 202 and no body (MCP
// Streamable HTTP: "the server MUST return HTTP status code 202 Accepted
// with no body"), and the session goes on. A seed project's client took
// 202 for an error.
func TestHTTPAcceptsNotificationsAndResponses(t *testing.T) {
	url, _, _ := startHTTP(t, "tok", nil)
	c := &rawClient{url: url, token: "tok"}
	resp, init := c.call(t, mcptest.Initialize)
	require.Nil(t, init.Error)
	c.session, c.version = resp.Header.Get("Mcp-Session-Id"), "2025-06-18"
	require.NotEmpty(t, c.session)

	t.Run("initialized notification", func(t *testing.T) {
		resp, body := c.post(t, mcptest.Initialized)
		assert.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
		assert.Empty(t, body)
	})

	// ping_client's call is answered on an event stream; the server's ping
	// comes first on it, and the client POSTs its answer on its own.
	for i, tt := range []struct {
		name, answer string
		fails        bool
	}{
		{"result response", `"result":{}`, false},
		{"error response", `"error":{"code":-32603,"message":"client is busy"}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A response the server never got would leave the call
			// hanging: give up on it after failAfter.
			ctx, cancel := context.WithTimeout(t.Context(), failAfter)
			defer cancel()
			call := c.request(t, rpc(10+i, "tools/call", map[string]any{"name": "ping_client", "arguments": map[string]any{}}))
			resp, err := http.DefaultClient.Do(call.WithContext(ctx))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			stream := newEvents(resp.Body)
			var ping struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			require.NoError(t, json.Unmarshal(stream.next(t), &ping))
			require.Equal(t, "ping", ping.Method)
			require.NotEmpty(t, ping.ID)

			answer, body := c.post(t, `{"jsonrpc":"2.0","id":`+string(ping.ID)+`,`+tt.answer+`}`)
			assert.Equal(t, http.StatusAccepted, answer.StatusCode, "%s", body)
			assert.Empty(t, body)

			var res rpcResponse
			require.NoError(t, json.Unmarshal(stream.next(t), &res), "the call is answered: the server got the response")
			assert.JSONEq(t, strconv.Itoa(10+i), string(res.ID))
			require.Nil(t, res.Error)
			var out struct {
				IsError bool `json:"isError"`
			}
			require.NoError(t, json.Unmarshal(res.Result, &out))
			assert.Equal(t, tt.fails, out.IsError, "%s", res.Result)
		})
	}

	_, list := c.call(t, rpc(1, "tools/list", map[string]any{}))
	require.Nil(t, list.Error, "the session goes on")
	assert.Contains(t, string(list.Result), `"slow_echo"`)
}

// TestHTTPRequestWithoutSession: with sessions, a request other than
// initialize that carries no Mcp-Session-Id gets 400 and a JSON-RPC error
// that says to initialize first (Streamable HTTP, "Session Management"),
// and opens no session; the go-sdk answered 200 with "method is invalid
// during session initialization". Stateless serving answers it.
func TestHTTPRequestWithoutSession(t *testing.T) {
	for _, mode := range []Mode{ModeBoth, ModeSessions} {
		t.Run(fmt.Sprintf("mode %d", mode), func(t *testing.T) {
			s := serveHTTP(t, Options{Mode: mode})
			for _, tt := range []struct {
				name, body, id string
			}{
				{"request", rpc(7, "tools/list", map[string]any{}), "7"},
				{"string id", `{"jsonrpc":"2.0","id":"a","method":"ping"}`, `"a"`},
				{"notification", mcptest.Initialized, "null"},
			} {
				t.Run(tt.name, func(t *testing.T) {
					for _, version := range []string{"", "2025-06-18"} {
						c := &rawClient{url: s.url, token: "tok", version: version}
						resp, body := c.post(t, tt.body)
						require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
						assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
						var msg rpcResponse
						require.NoError(t, json.Unmarshal(body, &msg), "%s", body)
						assert.JSONEq(t, tt.id, string(msg.ID))
						require.NotNil(t, msg.Error, "%s", body)
						assert.EqualValues(t, -32600, msg.Error.Code)
						assert.Contains(t, msg.Error.Message, "send initialize first")
						assert.Contains(t, msg.Error.Message, "Mcp-Session-Id")
					}
				})
			}
			assert.Zero(t, s.stats.opened.Load(), "sessions opened")
			assert.Zero(t, s.stats.Sessions())
			for range s.server.Sessions() {
				t.Error("the go-sdk holds a session")
			}
		})
	}
	t.Run("stateless", func(t *testing.T) {
		s := serveHTTP(t, Options{Mode: ModeStateless})
		c := &rawClient{url: s.url, token: "tok", version: "2025-06-18"}
		_, list := c.call(t, rpc(7, "tools/list", map[string]any{}))
		require.Nil(t, list.Error)
		assert.Contains(t, string(list.Result), `"slow_echo"`)
	})
}

// TestHTTPUnknownMethod: a request of a method the server does not serve
// gets the JSON-RPC Method not found error with its id, not the go-sdk's
// plain text, and the session goes on.
func TestHTTPUnknownMethod(t *testing.T) {
	s := serveHTTP(t, Options{})
	for _, tt := range []struct {
		name   string
		client func(t *testing.T) *rawClient
	}{
		{"2025-06-18 session", func(t *testing.T) *rawClient {
			c := s.initialized(t, "2025-06-18")
			c.version = "2025-06-18"
			return c
		}},
		{"2025-03-26 session, no version header", func(t *testing.T) *rawClient { return s.initialized(t, "2025-03-26") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.client(t)
			resp, body := c.post(t, rpc(9, "nosuch/method", map[string]any{}))
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var msg rpcResponse
			require.NoError(t, json.Unmarshal(body, &msg), "a JSON-RPC error: %s", body)
			assert.JSONEq(t, "9", string(msg.ID))
			require.NotNil(t, msg.Error, "%s", body)
			assert.EqualValues(t, -32601, msg.Error.Code)
			assert.Contains(t, msg.Error.Message, `"nosuch/method"`)

			_, list := c.call(t, rpc(10, "tools/list", map[string]any{}))
			require.Nil(t, list.Error, "the session goes on")
		})
	}
	t.Run("other refusals pass through", func(t *testing.T) {
		c := s.initialized(t, "2025-06-18")
		req := c.request(t, rpc(11, "tools/list", map[string]any{}))
		req.Header.Set("Last-Event-ID", "0")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
		assert.Contains(t, string(body), "Last-Event-ID")
	})
	// A 2025-03-26 batch holding one: the go-sdk runs none of it; each
	// request gets an error with its id, notifications none.
	t.Run("batch", func(t *testing.T) {
		c := s.initialized(t, "2025-03-26")
		for _, tt := range []struct {
			name string
			body []string
			want map[string]int // id: code
		}{
			{"unknown last", []string{rpc(1, "tools/list", map[string]any{}), rpc(2, "nosuch/method", map[string]any{})},
				map[string]int{"1": -32600, "2": -32601}},
			{"unknown first, twice, beside a notification",
				[]string{rpc(3, "nosuch/method", map[string]any{}), `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
					rpc(4, "tools/call", map[string]any{"name": "slow_echo", "arguments": map[string]any{"text": "x"}}), rpc(5, "nosuch/method", nil)},
				map[string]int{"3": -32601, "4": -32600, "5": -32601}},
			{"an unknown notification", []string{`{"jsonrpc":"2.0","method":"nosuch/note"}`, rpc(6, "tools/list", map[string]any{})},
				map[string]int{"6": -32600}},
			{"an unknown notification alone", []string{`{"jsonrpc":"2.0","method":"nosuch/note"}`},
				map[string]int{"null": -32601}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for i := range tt.body {
					tt.body[i] = strings.TrimSpace(tt.body[i])
				}
				resp, body := c.post(t, "["+strings.Join(tt.body, ",")+"]")
				require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
				assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				var msgs []rpcResponse
				if len(tt.want) == 1 && tt.want["null"] != 0 {
					var one rpcResponse
					require.NoError(t, json.Unmarshal(body, &one), "%s", body)
					msgs = append(msgs, one)
				} else {
					require.NoError(t, json.Unmarshal(body, &msgs), "a batch of errors: %s", body)
				}
				got := map[string]int{}
				for _, m := range msgs {
					require.NotNil(t, m.Error, "%s", body)
					got[string(m.ID)] = m.Error.Code
					if m.Error.Code == -32601 {
						assert.Contains(t, m.Error.Message, `"nosuch/`)
					} else {
						assert.Contains(t, m.Error.Message, "not run")
					}
				}
				assert.Equal(t, tt.want, got, "%s", body)
			})
		}
		_, list := c.call(t, rpc(10, "tools/list", map[string]any{}))
		require.Nil(t, list.Error, "the session goes on")
	})
}

// TestHTTPParseError: a POST whose body is not JSON gets the JSON-RPC
// Parse error (-32700) with "id": null and 400, in every mode and whatever
// its Mcp-Session-Id (none, a live session's, a gone one's), before the
// session is looked at: a 2025-06-18 client that sent one without a
// session was told to initialize first. A live session goes on; a message
// that parses still gets 404 for a gone session.
func TestHTTPParseError(t *testing.T) {
	for _, mode := range []Mode{ModeBoth, ModeSessions, ModeStateless} {
		t.Run(fmt.Sprintf("mode %d", mode), func(t *testing.T) {
			s := serveHTTP(t, Options{Mode: mode})
			type session struct {
				name string
				id   func(t *testing.T) string
			}
			sessions := []session{{"no session", func(*testing.T) string { return "" }}}
			if mode != ModeStateless {
				sessions = append(sessions,
					session{"live session", func(t *testing.T) string { return s.initialized(t, "2025-06-18").session }},
					session{"gone session", func(*testing.T) string { return "NOSUCHSESSION" }})
			}
			for _, sess := range sessions {
				t.Run(sess.name, func(t *testing.T) {
					c := &rawClient{url: s.url, token: "tok", version: "2025-06-18", session: sess.id(t)}
					for _, body := range []string{`{"jsonrpc":"2.0","id":1,`, "not json", "", `{"jsonrpc":"2.0","id":1} x`} {
						resp, data := c.post(t, body)
						require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q: %s", body, data)
						assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
						var msg rpcResponse
						require.NoError(t, json.Unmarshal(data, &msg), "%q: %s", body, data)
						assert.Equal(t, "null", string(msg.ID))
						require.NotNil(t, msg.Error, "%s", data)
						assert.EqualValues(t, -32700, msg.Error.Code, "%q: %s", body, data)
					}
					switch sess.name {
					case "live session":
						_, list := c.call(t, rpc(10, "tools/list", map[string]any{}))
						require.Nil(t, list.Error, "the session goes on")
					case "gone session":
						resp, data := c.post(t, rpc(10, "tools/list", map[string]any{}))
						assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a message that parses: %s", data)
					}
				})
			}
		})
	}
}
