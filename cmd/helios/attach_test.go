package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// launched is a helios an MCP client launched, as a host does: through
// go-sdk's CommandTransport, which owns its stdin and stdout.
type launched struct {
	name   string
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr *mcptest.Buffer
}

// launch starts a go-sdk client named name that launches helios on home.
func launch(ctx context.Context, name, home, registry string, args ...string) (*launched, error) {
	l := &launched{name: name, stderr: &mcptest.Buffer{}}
	l.cmd = exec.Command(heliosBin, append([]string{"--home", home, "--registry", registry}, args...)...)
	l.cmd.Stderr = l.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: l.cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; stderr:\n%s", name, err, l.stderr)
	}
	l.cs = cs
	return l, nil
}

// launchAll launches one client per name at the same moment.
func launchAll(t *testing.T, home, registry string, names ...string) []*launched {
	t.Helper()
	out := make([]*launched, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { out[i], errs[i] = launch(t.Context(), name, home, registry) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, l := range out {
			if l != nil {
				l.close()
			}
		}
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	return out
}

// close closes the client: its helios sees stdin end and exits.
func (l *launched) close() {
	l.cs.Close()
	if l.cmd.ProcessState == nil && l.cmd.Process != nil {
		l.cmd.Process.Kill()
		l.cmd.Wait()
	}
}

type processOut struct {
	Role      string `json:"role"`
	PID       int    `json:"pid"`
	WriterPID int    `json:"writer_pid"`
}

func serverInfo(t *testing.T, cs *mcp.ClientSession) processOut {
	t.Helper()
	info := mcptest.Call[struct {
		Process processOut `json:"process"`
	}](t, cs, "server_info", nil)
	return info.Process
}

// nothingLeft asserts that once every client has gone, nothing of the
// servers is left: no process, no socket, no state file, no registry entry.
func nothingLeft(t *testing.T, home, registry string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for _, pid := range pids {
		for proc.Running(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		assert.False(t, proc.Running(pid), "helios pid %d still runs", pid)
	}
	assert.NoFileExists(t, filepath.Join(home, "mcp.sock"))
	assert.True(t, stateGone(t, home), "no state file")
	entries, err := statefile.NewRegistry(registry).List()
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func pidsOf(ls []*launched) []int {
	var pids []int
	for _, l := range ls {
		if l.cmd.Process != nil {
			pids = append(pids, l.cmd.Process.Pid)
		}
	}
	return pids
}

// commits counts the commits of the home's config, as a reader beside the
// server sees them: the writer's last changes may be in gitstore's journal,
// not yet under the ref the git CLI reads.
func commits(t *testing.T, home string) int {
	store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	history, err := store.History("", 0)
	require.NoError(t, err)
	return len(history)
}

// TestManyClientsOneHome: four clients launch helios on one new home at the
// same moment, as hosts do; every one initializes, one process is the
// writer and the others are attached to it; 4 x 50 update_preference
// calls, all in flight at once, get 200 answers, 200 commits and every
// value on disk; and once the clients have gone nothing is left.
func TestManyClientsOneHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	registry := filepath.Join(t.TempDir(), "servers.json")
	ls := launchAll(t, home, registry, "c0", "c1", "c2", "c3")

	roles := map[string]int{}
	writer := 0
	for _, l := range ls {
		p := serverInfo(t, l.cs)
		roles[p.Role]++
		assert.Equal(t, l.cmd.Process.Pid, p.PID, "%s talks to the process it launched", l.name)
		if writer == 0 {
			writer = p.WriterPID
		}
		assert.Equal(t, writer, p.WriterPID, "one writer")
	}
	assert.Equal(t, map[string]int{"writer": 1, "attached": 3}, roles)
	assert.Eventually(t, func() bool {
		st, err := statefile.Read(filepath.Join(home, statefile.FileName))
		return err == nil && st.PID == writer && len(st.Sessions) == 3
	}, hangAfter, 5*time.Millisecond, "the writer's state file, naming three attached sessions")

	before := commits(t, home)
	sessions := map[string]*mcp.ClientSession{}
	for _, l := range ls {
		sessions[l.name] = l.cs
	}
	acked := mcptest.UpdateAtOnce(t, 50, "update_preference",
		func(key, value string) any { return map[string]any{"key": key, "value": value} }, sessions)
	assert.Len(t, acked, 200)
	assert.Equal(t, before+200, commits(t, home), "one commit per call")
	var p helios.Persona
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(home, "config", "personas", "default.yaml"), &p))
	for _, a := range acked {
		assert.Equal(t, a.Value, p.Preferences[a.Key], "%s on disk", a.Key)
	}

	pids := pidsOf(ls)
	for _, l := range ls {
		require.NoError(t, l.cs.Close())
	}
	nothingLeft(t, home, registry, pids)
}

// TestAttachRefusesAnotherUser: a helios run as another user on a home in
// use cannot attach to its writer, even where the mistakes of a home open
// to others let it reach the socket: it exits 3 and says why, and the
// writer gets no session.
func TestAttachRefusesAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run helios as nobody")
	}
	dir, err := os.MkdirTemp("", "helios-attach-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	home := filepath.Join(dir, "home")
	ls := launchAll(t, home, "", "owner")
	serverInfo(t, ls[0].cs)
	for path, mode := range map[string]os.FileMode{home: 0o755, filepath.Join(home, "mcp.sock"): 0o666, filepath.Join(home, ".lock"): 0o644} {
		require.NoError(t, os.Chmod(path, mode))
	}
	exe := filepath.Join(dir, "helios")
	data, err := os.ReadFile(heliosBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, data, 0o755))

	cmd := exec.Command(exe, "--home", home, "--registry", "")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, stderr.String())
	assert.Equal(t, exitInUse, ee.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "cannot attach to it")
	assert.Contains(t, stderr.String(), "runs as uid 0, not as this user (uid 65534)")
	st, err := statefile.Read(filepath.Join(home, statefile.FileName))
	require.NoError(t, err)
	assert.Empty(t, st.Sessions)
}

// outcome is what became of one update_preference call.
type outcome struct {
	client, key, value string
	err                error // nil: acknowledged
}

// unknownOutcome reports whether err is the error of a call whose writer
// stopped while it ran.
func unknownOutcome(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == lifecycle.CodeOutcomeUnknown &&
		strings.Contains(werr.Message, "may or may not have taken effect") && strings.Contains(werr.Message, "mcpkeep history --home")
}

// load keeps a client busy with bursts of update_preference calls, every
// call of a burst in flight at once, until stop is closed or the client's
// connection to its helios is gone.
type load struct {
	l    *launched
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	outcomes []outcome
}

func startLoad(l *launched, burst int) *load {
	ld := &load{l: l, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ld.done)
		for seq := 0; ; {
			select {
			case <-ld.stop:
				return
			default:
			}
			var wg sync.WaitGroup
			var closed atomic.Bool // every call of the burst failed, none for its writer's going: the client's helios is gone
			closed.Store(true)
			for range burst {
				key, value := fmt.Sprintf("%s-%d", l.name, seq), fmt.Sprintf("v%d", seq)
				seq++
				wg.Go(func() {
					res, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "update_preference",
						Arguments: map[string]any{"key": key, "value": value}})
					if err == nil && res.IsError {
						err = fmt.Errorf("tool error: %s", mcptest.Text(res))
					}
					if err == nil || unknownOutcome(err) {
						closed.Store(false)
					}
					ld.mu.Lock()
					ld.outcomes = append(ld.outcomes, outcome{l.name, key, value, err})
					ld.mu.Unlock()
				})
			}
			wg.Wait()
			if closed.Load() {
				return
			}
		}
	}()
	return ld
}

func (ld *load) halt() []outcome {
	close(ld.stop)
	<-ld.done
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.outcomes
}

// writerOf returns the client whose helios is the home's writer, once the
// state file names a ready process among ls other than not.
func writerOf(t *testing.T, home string, ls map[*launched]*load, not int) *launched {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for {
		if st, err := statefile.Read(filepath.Join(home, statefile.FileName)); err == nil && st.Status == statefile.StatusReady && st.PID != not {
			for l := range ls {
				if l.cmd.Process.Pid == st.PID {
					return l
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no writer among the clients' processes after %v", hangAfter)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestHandoverUnderLoad: three clients keep helios busy on one home while
// the writer is stopped 20 times at random moments (5 with -short): by
// SIGKILL, by its client closing stdin, by SIGTERM; a new client is
// launched after each. Every surviving client keeps working, and any call
// of theirs that fails carries the outcome-unknown error; no acknowledged
// write is lost; a change whose outcome was unknown is on disk once or not
// at all; git fsck --strict is clean; once every client has gone nothing
// of the servers is left.
func TestHandoverUnderLoad(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for _, how := range []string{"kill", "eof", "sigterm"} {
		t.Run(how, func(t *testing.T) { handoverUnderLoad(t, how, rounds) })
	}
}

func handoverUnderLoad(t *testing.T, how string, rounds int) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	home := filepath.Join(t.TempDir(), "home")
	registry := filepath.Join(t.TempDir(), "servers.json")
	live := map[*launched]*load{}
	var all []*launched
	for _, l := range launchAll(t, home, registry, "c0", "c1", "c2") {
		live[l] = startLoad(l, 5)
		all = append(all, l)
	}
	var survivors, victims []outcome
	for round := range rounds {
		time.Sleep(time.Duration(20+rng.IntN(130)) * time.Millisecond) // a random moment of the burst
		w := writerOf(t, home, live, 0)
		pid := w.cmd.Process.Pid
		switch how {
		case "kill":
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		case "sigterm":
			require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
		case "eof":
			go w.cs.Close()
		}
		victims = append(victims, live[w].halt()...)
		delete(live, w)
		w.close()
		next, err := launch(t.Context(), fmt.Sprintf("r%d", round), home, registry)
		require.NoError(t, err)
		t.Cleanup(next.close)
		all = append(all, next)
		live[next] = startLoad(next, 5)
		writerOf(t, home, live, pid)
	}
	for l, ld := range live {
		survivors = append(survivors, ld.halt()...)
		mcptest.Call[helios.Persona](t, l.cs, "get_persona", nil) // still working
	}
	pids := pidsOf(all)
	for l := range live {
		require.NoError(t, l.cs.Close())
	}
	nothingLeft(t, home, registry, pids)

	var p helios.Persona
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(home, "config", "personas", "default.yaml"), &p))
	config := filepath.Join(home, "config")
	changed := map[string]int{} // commits per key
	for line := range strings.Lines(git(t, config, "log", "--format=%s")) {
		if key, ok := strings.CutPrefix(strings.TrimSpace(line), "update_preference default."); ok {
			changed[key]++
		}
	}
	acked, unknown, died := 0, 0, 0
	for _, o := range append(survivors, victims...) {
		switch {
		case o.err == nil:
		case unknownOutcome(o.err):
			unknown++
		default:
			died++ // the client's own helios died under it
		}
		if o.err == nil {
			acked++
			assert.Equal(t, o.value, p.Preferences[o.key], "acknowledged %s on disk", o.key)
			assert.Equal(t, 1, changed[o.key], "acknowledged %s committed once", o.key)
			continue
		}
		if v, ok := p.Preferences[o.key]; ok {
			assert.Equal(t, o.value, v, "%s, whose outcome was unknown, is on disk with its value", o.key)
		}
		assert.LessOrEqual(t, changed[o.key], 1, "%s, whose outcome was unknown, committed at most once", o.key)
	}
	for _, o := range survivors {
		if o.err != nil {
			assert.True(t, unknownOutcome(o.err), "%s: a surviving client's call failed without the outcome-unknown error: %v", o.key, o.err)
		}
	}
	t.Logf("%s x %d: %d calls acknowledged, %d answered outcome unknown, %d lost with their client's own helios", how, rounds, acked, unknown, died)
	assert.Positive(t, acked)

	git(t, config, "fsck", "--strict")
}

// TestAttachedStops: an attached helios exits promptly with status 0 when
// its client closes stdin and when it gets SIGTERM, after answering its
// client; the writer and its client go on, and the session is gone from
// the state file.
func TestAttachedStops(t *testing.T) {
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			registry := filepath.Join(t.TempDir(), "servers.json")
			writer := launchAll(t, home, registry, "writer")[0]
			serverInfo(t, writer.cs)
			s := start(t, home, registry)
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: s.Stdout(), Writer: s.Stdin()}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { cs.Close() })
			require.Equal(t, "attached", serverInfo(t, cs).Role)
			mcptest.Call[struct{ Commit string }](t, cs, "update_preference", map[string]any{"key": "k", "value": "v"})

			if how == "eof" {
				require.NoError(t, s.Stdin().Close())
			} else {
				require.NoError(t, syscall.Kill(s.Pid(), syscall.SIGTERM))
			}
			require.NoError(t, s.exit(t, hangAfter), "exit status 0; stderr:\n%s", s.Stderr())
			assert.Equal(t, "writer", serverInfo(t, writer.cs).Role, "the writer goes on")
			assert.Eventually(t, func() bool {
				st, err := statefile.Read(filepath.Join(home, statefile.FileName))
				return err == nil && len(st.Sessions) == 0
			}, hangAfter, 5*time.Millisecond, "the session is gone from the state file")
		})
	}
}
