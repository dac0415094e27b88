package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestCrash kills the server at every failpoint of the phases it goes
// through (a new home installed, a restart, notes added, a clean stop,
// the start after a crash in the middle of a change), then at random
// moments, and checks after each crash and restart that every note the
// server acknowledged is there, whole and committed, and that no note is
// ever torn. MCPKEEP_CRASHES=N runs N crashes instead of the short form
// (every failpoint once and 10 random kills); MCPKEEP_CRASH_SEED replays
// a run.
func TestCrash(t *testing.T) {
	s := &crashSuite{dir: t.TempDir(), acked: map[string]map[string]Note{}, sent: map[string]Note{}}
	plan := crashtest.Plan{
		Phases: []crashtest.Phase{crashtest.PhaseInstall, crashtest.PhaseRestart, crashtest.PhaseChange,
			crashtest.PhaseShutdown, crashtest.PhaseRecovery},
		MaxDelay: 150 * time.Millisecond,
		Start:    s.start,
		Drive:    s.drive,
		Restart:  s.restart,
		Check:    s.check,
	}
	plan.Failpoints = crashtest.FailpointsIn(plan.Phases...)
	plan.Iterations = len(plan.Failpoints) + 10
	if n, err := strconv.Atoi(os.Getenv("MCPKEEP_CRASHES")); err == nil && n > 0 {
		plan.Iterations = n
	}
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	assert.Empty(t, sum.Violations)
	assert.Empty(t, sum.Unfired, "every failpoint of the plan's phases fires")
}

// crashSuite is what the Plan's functions share. Run calls them one at a
// time.
type crashSuite struct {
	dir   string
	acked map[string]map[string]Note // by home, the notes the server acknowledged
	sent  map[string]Note            // every note ever sent, by name
}

// home is the iteration's home: a new one for a fresh install, else the
// one most iterations share.
func (s *crashSuite) home(it *crashtest.Iteration) string {
	if it.Phase == crashtest.PhaseInstall {
		return filepath.Join(s.dir, fmt.Sprintf("install-%d", it.N))
	}
	return filepath.Join(s.dir, "home")
}

func (s *crashSuite) cmd(it *crashtest.Iteration) crashtest.Cmd {
	return crashtest.Cmd{
		Path: notesBin,
		// A registry of the test's own: the failpoints of registering
		// are reached, and the user's registry is left alone.
		Env: []string{"NOTES_HOME=" + s.home(it), "MCPKEEP_REGISTRY=" + filepath.Join(s.dir, "servers.json")},
	}
}

func (s *crashSuite) start(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
	c := s.cmd(it)
	c.Failpoints = it.Failpoints
	return crashtest.Start(ctx, c)
}

// drive adds three notes, recording each one acknowledged, then stops the
// server cleanly by closing its stdin, and waits for it to exit. The
// server dying on the way is what the test is for: drive then returns.
func (s *crashSuite) drive(ctx context.Context, it *crashtest.Iteration, p *crashtest.Process) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "crash-test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: p.Stdout(), Writer: p.Stdin()}, nil)
	if err != nil {
		return nil // it died before it answered
	}
	home := s.home(it)
	for i := range 3 {
		name := fmt.Sprintf("n%d-%d", it.N, i)
		if it.Prepare {
			name = fmt.Sprintf("p%d-%d", it.N, i)
		}
		n := Note{Name: name, Title: "Note " + name, Text: strings.Repeat(name+" ", 100)}
		s.sent[name] = n
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: n})
		if err != nil {
			return nil // it died
		}
		if res.IsError {
			return fmt.Errorf("add_note %s: the tool failed: %v", name, res.Content)
		}
		if s.acked[home] == nil {
			s.acked[home] = map[string]Note{}
		}
		s.acked[home][name] = n
	}
	cs.Close() // closes the server's stdin: a clean stop
	select {
	case <-p.Done():
	case <-ctx.Done():
	}
	return nil
}

// restart starts the server again with no failpoint and stdin at its end:
// it recovers the home and stops at once, with exit status 0.
func (s *crashSuite) restart(ctx context.Context, it *crashtest.Iteration) error {
	c := s.cmd(it)
	c.Stdin = strings.NewReader("")
	p, err := crashtest.Start(ctx, c)
	if err != nil {
		return err
	}
	if err := p.Wait(); err != nil {
		return fmt.Errorf("%w; stderr:\n%s", err, p.Stderr())
	}
	return nil
}

// check checks the home after the restart: no state file, a repository
// with nothing to repair and nothing uncommitted, every acknowledged note
// in it, and every note there one that was sent, whole.
func (s *crashSuite) check(ctx context.Context, it *crashtest.Iteration) error {
	home := s.home(it)
	var errs []error
	if _, err := os.Stat(filepath.Join(home, statefile.FileName)); !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("the state file is left after a clean stop (%v)", err))
	}
	store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer store.Close()
	if r := store.Repairs(); len(r) > 0 {
		errs = append(errs, fmt.Errorf("the repository needs repairs after the restart: %v", r))
	}
	if dirty, err := store.Dirty(); err != nil || dirty {
		errs = append(errs, fmt.Errorf("uncommitted changes after the restart (%v)", err))
	}
	for name, want := range s.acked[home] {
		data, err := store.ReadAt("HEAD", "notes/"+name+".yaml")
		if err != nil {
			errs = append(errs, fmt.Errorf("acknowledged note %s is not committed: %w", name, err))
			continue
		}
		if got := parse(name, data); got != want {
			errs = append(errs, fmt.Errorf("acknowledged note %s is committed as %+v", name, got))
		}
	}
	entries, err := os.ReadDir(filepath.Join(home, "config", "notes"))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		name, _ := strings.CutSuffix(e.Name(), ".yaml")
		data, err := os.ReadFile(filepath.Join(home, "config", "notes", e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if want, ok := s.sent[name]; ok && parse(name, data) != want {
			errs = append(errs, fmt.Errorf("note %s is torn: %q", name, data))
		} else if !ok && name != "welcome" {
			errs = append(errs, fmt.Errorf("config/notes/%s is no note that was sent", e.Name()))
		}
	}
	return errors.Join(errs...)
}

func parse(name string, data []byte) Note {
	n := Note{Name: name}
	if err := yaml.Unmarshal(data, &n); err != nil {
		return Note{Name: name, Text: "unparsable: " + err.Error()}
	}
	return n
}
