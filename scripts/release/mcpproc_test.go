package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// waitLimit bounds every wait of the packaging checks: an answer, an exit.
// It is Claude Desktop's fixed start-up budget, the largest a client gives.
const waitLimit = 60 * time.Second

// mcpProc is an MCP server launched as a client launches it (npx, a
// wheel's script, a binary), spoken to in JSON-RPC lines on its stdin and
// stdout.
type mcpProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte // stdout lines, closed at EOF
	stderr  *mcptest.Buffer
	started time.Time
	exited  chan struct{} // closed when cmd.Wait returned
	waitErr error
}

// startMCP starts argv in dir with env (the whole environment).
func startMCP(t testing.TB, dir string, env []string, argv ...string) *mcpProc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	p := &mcpProc{cmd: cmd, lines: make(chan []byte, 64), stderr: &mcptest.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p.started = time.Now()
	require.NoError(t, cmd.Start(), "start %v", argv)
	go func() {
		defer close(p.lines)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				p.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		// Wait returns once stdout is drained, which the reader above does.
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		default:
			// A failed check left it running: stop the whole tree.
			for _, pid := range append(descendants(cmd.Process.Pid), cmd.Process.Pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			<-p.exited
		}
	})
	return p
}

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// call sends a request and returns the result of its answer, skipping
// notifications; it fails the test on an error answer or after waitLimit.
func (p *mcpProc) call(t testing.TB, id int, method string, params any) json.RawMessage {
	t.Helper()
	p.send(t, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	deadline := time.After(waitLimit)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s: stdout ended before the answer to %s; stderr:\n%s", p.cmd.Path, method, p.stderr)
			}
			var msg struct {
				ID     *int            `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *rpcError       `json:"error"`
			}
			require.NoError(t, json.Unmarshal(line, &msg), "every stdout line is JSON-RPC: %q", line)
			if msg.ID == nil || *msg.ID != id {
				continue
			}
			require.Nil(t, msg.Error, "%s answered an error", method)
			return msg.Result
		case <-deadline:
			t.Fatalf("%s: no answer to %s in %s; stderr:\n%s", p.cmd.Path, method, waitLimit, p.stderr)
		}
	}
}

// send writes one JSON-RPC message.
func (p *mcpProc) send(t testing.TB, msg any) {
	t.Helper()
	b, err := json.Marshal(msg)
	require.NoError(t, err)
	_, err = p.stdin.Write(append(b, '\n'))
	require.NoError(t, err)
}

// initialize does the handshake and returns the time from start to the
// initialize answer and the server's name and version.
func (p *mcpProc) initialize(t testing.TB) (time.Duration, string) {
	t.Helper()
	res := p.call(t, 1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "packaging-check", "version": "v0"}})
	took := time.Since(p.started)
	var init struct {
		ServerInfo struct{ Name, Version string } `json:"serverInfo"`
	}
	require.NoError(t, json.Unmarshal(res, &init), "%s", res)
	p.send(t, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return took, init.ServerInfo.Version
}

// tool calls an MCP tool and decodes its structured result into out.
func (p *mcpProc) tool(t testing.TB, id int, name string, args map[string]any, out any) {
	t.Helper()
	res := p.call(t, id, "tools/call", map[string]any{"name": name, "arguments": args})
	var r struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(res, &r), "%s", res)
	require.False(t, r.IsError, "%s: %s", name, res)
	require.NoError(t, json.Unmarshal(r.StructuredContent, out), "%s", res)
}

// waitExit waits up to waitLimit for the launched process to exit and
// returns its exit code (-1 when a signal ended it).
func (p *mcpProc) waitExit(t testing.TB) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(waitLimit):
		t.Fatalf("%s did not exit in %s; stderr:\n%s", p.cmd.Path, waitLimit, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// procStat is what /proc/<pid>/stat says of a process: its parent and
// state letter.
func procStat(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0], true
}

// descendants returns every process below pid (Linux: from /proc).
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(n); ok {
			children[ppid] = append(children[ppid], n)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// alive reports whether pid runs; a zombie nobody reaped has exited (seen
// where /proc is, Linux).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	_, state, ok := procStat(pid)
	return !ok && runtime.GOOS != "linux" || ok && state != "Z" && state != "X"
}

// describeProcs is "pid name" for each pid, for logs.
func describeProcs(pids []int) string {
	var parts []string
	for _, pid := range pids {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			exe = "?"
		}
		parts = append(parts, fmt.Sprintf("%d %s", pid, filepath.Base(exe)))
	}
	return strings.Join(parts, ", ")
}

// waitGoneAll waits up to waitLimit for every pid to exit.
func waitGoneAll(t testing.TB, pids []int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running %s later: %s", waitLimit, describeProcs(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
