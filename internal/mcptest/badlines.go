package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A BadLine is a line a stdio client may send by mistake, and the JSON-RPC
// error a server is to answer it with before it reads on.
type BadLine struct {
	Name string // what is wrong with it
	Line string // without its newline
	Code int64  // -32700 Parse error or -32600 Invalid Request
	ID   string // the answer's id, as JSON
}

// BadLines are the kinds of bad line. Those that hold a ping use id 9,
// which must never be answered: nothing of a refused line is run.
var BadLines = []BadLine{
	{"not JSON", "garbage", -32700, "null"},
	{"cut short", `{"jsonrpc":"2.0","id":9,"method":"ping"`, -32700, "null"},
	{"two values", `{"jsonrpc":"2.0","id":9,"method":"ping"} {}`, -32700, "null"},
	{"no version", `{"id":4}`, -32600, "4"},
	{"wrong version", `{"jsonrpc":"1.0","id":"a","method":"ping"}`, -32600, `"a"`},
	{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, -32600, "null"},
	{"neither request nor response", `{"jsonrpc":"2.0"}`, -32600, "null"},
	{"string", `"x"`, -32600, "null"},
	{"number", `5`, -32600, "null"},
	{"null", `null`, -32600, "null"},
	{"empty batch", `[]`, -32600, "null"},
	{"batch with a bad value", `[{"jsonrpc":"2.0","id":9,"method":"ping"},1]`, -32600, "null"},
	{"batch with an id twice", `[{"jsonrpc":"2.0","id":9,"method":"ping"},{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, "null"},
}

// Ping returns a ping request with id as a stdio line.
func Ping(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", id) }

// answer is a JSON-RPC response as the tests read it.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func readAnswer(t testing.TB, out *bufio.Reader, after string) answer {
	t.Helper()
	line, err := out.ReadBytes('\n')
	require.NoError(t, err, "reading the answer after %s", after)
	var a answer
	require.NoError(t, json.Unmarshal(line, &a), "answer after %s: %s", after, line)
	return a
}

// ExchangeBadLines drives a stdio server past its handshake the way an
// interactive client does, one line at a time: a ping, then each bad line
// followed by a ping. Each bad line must get its error, and each ping its
// answer, in turn: the session goes on. Pings use ids from 101.
func ExchangeBadLines(t testing.TB, in io.Writer, out *bufio.Reader) {
	t.Helper()
	id := 100
	ping := func(after string) {
		t.Helper()
		id++
		_, err := io.WriteString(in, Ping(id))
		require.NoError(t, err)
		a := readAnswer(t, out, after)
		assert.Equal(t, fmt.Sprint(id), string(a.ID), "the ping after %s", after)
		assert.Nil(t, a.Error, "the ping after %s", after)
	}
	ping("the handshake")
	for _, b := range BadLines {
		_, err := io.WriteString(in, b.Line+"\n")
		require.NoError(t, err)
		a := readAnswer(t, out, b.Name)
		assert.Equal(t, b.ID, string(a.ID), "%s: the answer's id", b.Name)
		if assert.NotNil(t, a.Error, "%s: an error", b.Name) {
			assert.Equal(t, b.Code, a.Error.Code, "%s: %s", b.Name, a.Error.Message)
		}
		ping(b.Name)
	}
}

// BadLinesBurst is what a client that writes without waiting sends: the
// handshake, then each bad line between pings (ids from 101), a blank
// line, and last a bad line, so that EOF follows it.
func BadLinesBurst() string {
	var b strings.Builder
	b.WriteString(Handshake)
	b.WriteString(Ping(101))
	for i, bl := range BadLines {
		b.WriteString(bl.Line + "\n")
		b.WriteString(Ping(102 + i))
	}
	b.WriteString(" \n")
	b.WriteString(BadLines[0].Line + "\n")
	return b.String()
}

// CheckBadLinesBurst checks the answers a server wrote for BadLinesBurst
// until its stdout ends: the initialize and every ping answered once,
// every bad line answered with its error once (answers to different lines
// may come in any order: the server runs requests concurrently), and
// nothing else: no answer for id 9. It calls atLast, unless nil, once
// every answer was read (a server that drops calls in flight at stdin's
// EOF closes stdin there).
func CheckBadLinesBurst(t testing.TB, out io.Reader, atLast func()) {
	t.Helper()
	n := 0
	want := map[string]int{"0": 1, "101": 1} // id (or code/id of an error) -> count
	for i, bl := range BadLines {
		want[fmt.Sprint(102+i)]++
		want[fmt.Sprintf("%d/%s", bl.Code, bl.ID)]++
	}
	want[fmt.Sprintf("%d/%s", BadLines[0].Code, BadLines[0].ID)]++
	for _, c := range want {
		n += c
	}
	got := map[string]int{}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var a answer
		require.NoError(t, json.Unmarshal(sc.Bytes(), &a), "%s", sc.Bytes())
		key := string(a.ID)
		if a.Error != nil && (a.Error.Code == -32700 || a.Error.Code == -32600) {
			key = fmt.Sprintf("%d/%s", a.Error.Code, a.ID)
		} else {
			assert.Nil(t, a.Error, "%s", sc.Bytes())
		}
		got[key]++
		if n--; n == 0 && atLast != nil {
			atLast()
		}
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, want, got)
}
