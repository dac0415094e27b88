package stdioconn

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// fuzzLimit is the line limit of FuzzFilter, small for long lines to come up.
const fuzzLimit = 256

// FuzzFilter: whatever the input, the filter does not panic; each line
// is passed on unchanged (trimmed of blanks) or answered once with an
// error, never both, blank lines neither; a line holding one valid
// JSON-RPC message is passed; and go-sdk's IOTransport reads what was
// passed to its end without a decoding error.
func FuzzFilter(f *testing.F) {
	f.Add([]byte(mcptest.Handshake + mcptest.Ping(1)))
	f.Add([]byte(mcptest.BadLinesBurst()))
	f.Add([]byte(strings.ReplaceAll(mcptest.BadLinesBurst(), "\n", "\r\n")))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"1","result":{}}]` + "\n\n \n{}"))
	f.Add([]byte(strings.Repeat("x", fuzzLimit+1) + "\n" + mcptest.Ping(2)))
	for _, b := range mcptest.BadLines {
		f.Add([]byte(b.Line))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var answers bytes.Buffer
		passed, err := io.ReadAll(newFilter(bytes.NewReader(data), &answers, slog.New(slog.DiscardHandler), fuzzLimit))
		require.NoError(t, err)

		var out []string
		if len(passed) > 0 {
			require.Equal(t, byte('\n'), passed[len(passed)-1], "a passed line ends with its newline")
			out = strings.Split(string(passed[:len(passed)-1]), "\n")
		}
		lines := strings.Split(string(data), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1] // the newline ended the last line
		}
		owed := 0 // lines that get an answer or are passed on
		next := 0 // the next passed line to match
		for _, line := range lines {
			v := strings.Trim(line, " \t\r")
			if v == "" && len(line) <= fuzzLimit {
				continue
			}
			owed++
			if next < len(out) && out[next] == v && len(line) <= fuzzLimit {
				next++
				continue
			}
			if len(line) <= fuzzLimit && v[0] == '{' && json.Valid([]byte(v)) {
				_, err := jsonrpc.DecodeMessage([]byte(v))
				assert.Error(t, err, "a valid message was not passed on: %q", v)
			}
		}
		assert.Equal(t, len(out), next, "every passed line is an input line, in order")

		n := 0
		for a := range strings.Lines(answers.String()) {
			n++
			var resp struct {
				JSONRPC string
				ID      json.RawMessage
				Error   struct{ Code int64 }
			}
			require.NoError(t, json.Unmarshal([]byte(a), &resp), "%s", a)
			assert.Equal(t, "2.0", resp.JSONRPC, "%s", a)
			assert.Contains(t, []int64{jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest}, resp.Error.Code, "%s", a)
		}
		assert.Equal(t, owed-len(out), n, "one answer per line not passed on")

		// The IOTransport reads every passed line (a batch's messages one
		// by one) to the end: only a batch's ids, which the filter does
		// not track across lines, may be refused.
		c, err := (&mcp.IOTransport{Reader: io.NopCloser(bytes.NewReader(passed)), Writer: nopWriteCloser{io.Discard}, MaxLineLength: -1}).Connect(t.Context())
		require.NoError(t, err)
		defer c.Close()
		for {
			_, err := c.Read(t.Context())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				require.Contains(t, err.Error(), "previously seen", "IOTransport refused a passed line")
			}
		}
	})
}
