package stdioconn

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// serve connects an mcp.Server to a Transport over pipes, with limit as
// MaxLineLength, and returns the client's ends. The server's stdout is
// closed when its session ends.
func serve(t *testing.T, limit int, log *slog.Logger) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	server := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	ss, err := server.Connect(t.Context(), &Transport{Reader: inR, Writer: outW, MaxLineLength: limit, Logger: log}, nil)
	require.NoError(t, err)
	go func() {
		ss.Wait()
		outW.Close()
	}()
	return inW, bufio.NewReader(outR)
}

// handshake initializes the session and reads the answer.
func handshake(t *testing.T, in io.Writer, out *bufio.Reader) {
	t.Helper()
	_, err := io.WriteString(in, mcptest.Handshake)
	require.NoError(t, err)
	line, err := out.ReadBytes('\n')
	require.NoError(t, err)
	assert.Contains(t, string(line), `"id":0,"result"`)
}

// TestBadLineExchange: each kind of bad line gets its error, and the
// requests before and after it their answers, in turn.
func TestBadLineExchange(t *testing.T) {
	in, out := serve(t, 0, nil)
	handshake(t, in, out)
	mcptest.ExchangeBadLines(t, in, out)
}

// TestBadLineBurst: the same written at once, ending with a bad line:
// everything is answered once, and EOF then ends the session. (The bare
// go-sdk server drops calls in flight at EOF; mcpserve's drain does not,
// and its tests close stdin at once.)
func TestBadLineBurst(t *testing.T) {
	in, out := serve(t, 0, nil)
	_, err := io.WriteString(in, mcptest.BadLinesBurst())
	require.NoError(t, err)
	mcptest.CheckBadLinesBurst(t, out, func() { in.Close() })
}

// padded returns a ping with id as a line of exactly n bytes (without its
// newline).
func padded(t *testing.T, id, n int) string {
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"_meta":{"pad":"`, id)
	tail := `"}}}`
	require.Greater(t, n, len(head)+len(tail))
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

// TestLongLines: a line up to the limit is read whatever its size; a
// longer one is answered and skipped, and the next one read.
func TestLongLines(t *testing.T) {
	const limit = 100 << 10 // more than the 64 KiB read buffer
	tests := []struct {
		name    string
		n       int
		refused bool
	}{
		{"short", 200, false},
		{"beyond the read buffer", 80 << 10, false},
		{"at the limit", limit, false},
		{"one byte more", limit + 1, true},
		{"twice the limit", 2 * limit, true},
	}
	var logs mcptest.Logs
	in, out := serve(t, limit, slog.New(&logs))
	handshake(t, in, out)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			go io.WriteString(in, padded(t, i+1, tt.n)+"\n"+mcptest.Ping(1000+i))
			first := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i+1)
			if tt.refused {
				first = fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a line of more than %d bytes; it was skipped unread"}}`, limit)
			}
			// The server runs requests concurrently: the two answers
			// may come in either order.
			assert.ElementsMatch(t, []string{first, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, 1000+i)}, readLines(t, out, 2))
		})
	}
	for _, r := range logs.Records() {
		assert.LessOrEqual(t, len(mcptest.Attr(r, "excerpt")), excerptLen)
	}
	assert.Len(t, logs.Records(), 2, "one log line per refused line")
}

// readLines reads n lines from out.
func readLines(t *testing.T, out *bufio.Reader, n int) []string {
	t.Helper()
	var lines []string
	for range n {
		line, err := out.ReadString('\n')
		require.NoError(t, err)
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
	return lines
}

// TestRefusedAfterFilter: what IOTransport's Read still refuses of a line
// the filter passed (here the id of an earlier batch still open: go-sdk
// v1.8.0 keeps a batch's notification open for ever) is answered, and
// reading goes on.
func TestRefusedAfterFilter(t *testing.T) {
	in, out := serve(t, 0, nil)
	handshake(t, in, out)
	const batch = `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]` + "\n"
	_, err := io.WriteString(in, batch+batch+mcptest.Ping(5))
	require.NoError(t, err)
	line, err := out.ReadBytes('\n')
	require.NoError(t, err)
	var a struct {
		ID    json.RawMessage
		Error struct{ Code int64 }
	}
	require.NoError(t, json.Unmarshal(line, &a), "%s", line)
	assert.Equal(t, "null", string(a.ID), "%s", line)
	assert.Equal(t, int64(-32600), a.Error.Code, "%s", line)
	line, err = out.ReadBytes('\n')
	require.NoError(t, err)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":5,"result":{}}`, string(line))
}

// errReader returns its lines, then err.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		err = e.err
	}
	return n, err
}

// TestReadEnds: stdin's EOF or error ends Read with that error, also just
// after a bad line; each bad line before it was answered.
func TestReadEnds(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		input   string
		err     error
		answers int
	}{
		{"EOF", "", io.EOF, 0},
		{"EOF after a bad line", "garbage\n", io.EOF, 1},
		{"EOF within a bad line", "garbage", io.EOF, 1},
		{"EOF after bad lines of each kind", "garbage\n[]\n{\"id\":4}\n\n", io.EOF, 3},
		{"error after a bad line", "garbage\n", boom, 1},
		{"error within a line", `{"jsonrpc":"2.0"`, boom, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			c, err := (&Transport{Reader: &errReader{strings.NewReader(tt.input), tt.err}, Writer: &out}).Connect(t.Context())
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Read(t.Context())
			require.ErrorIs(t, err, tt.err)
			assert.Equal(t, tt.answers, strings.Count(out.String(), "\n"), "%s", out.String())
		})
	}
}

// TestValidPassesUnchanged: good lines reach the IOTransport as they
// were, without the blanks around them, each ended with one newline.
func TestValidPassesUnchanged(t *testing.T) {
	ping1, ping4 := strings.TrimSuffix(mcptest.Ping(1), "\n"), strings.TrimSuffix(mcptest.Ping(4), "\n")
	const batch = `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"result":{}}]`
	input := mcptest.Handshake + "  " + ping1 + " \r\n\n\t\n" + batch + "\r\n" + ping4
	var answers bytes.Buffer
	got, err := io.ReadAll(newFilter(strings.NewReader(input), &answers, slog.New(slog.DiscardHandler), mcp.DefaultMaxLineLength))
	require.NoError(t, err)
	assert.Equal(t, mcptest.Handshake+ping1+"\n"+batch+"\n"+ping4+"\n", string(got))
	assert.Empty(t, answers.String(), "no answer to good lines")
}

// TestLog: each bad line is logged once, at Info, with fault=client and an
// excerpt, never the whole line.
func TestLog(t *testing.T) {
	var logs mcptest.Logs
	long := `{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("x", 200)
	var out bytes.Buffer
	c, err := (&Transport{Reader: strings.NewReader("garbage\n" + long + "\n"), Writer: &out, Logger: slog.New(&logs)}).Connect(t.Context())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Read(t.Context())
	require.ErrorIs(t, err, io.EOF)
	rs := logs.Records()
	require.Len(t, rs, 2)
	for _, r := range rs {
		assert.Equal(t, slog.LevelInfo, r.Level)
		assert.Equal(t, "client", mcptest.Attr(r, "fault"))
	}
	assert.Equal(t, "garbage", mcptest.Attr(rs[0], "excerpt"))
	assert.Equal(t, long[:excerptLen], mcptest.Attr(rs[1], "excerpt"))
}

func TestConnectNeedsStreams(t *testing.T) {
	_, err := (&Transport{Writer: io.Discard}).Connect(context.Background())
	assert.Error(t, err)
	_, err = (&Transport{Reader: strings.NewReader("")}).Connect(context.Background())
	assert.Error(t, err)
}
