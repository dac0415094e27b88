package recovery_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/recovery"
)

var three = []string{"config/base.yaml", "config/personas/default.yaml", "config/personas/new.yaml"}

const cpHomeEnv = "RECOVERY_CP_HOME"

// maxUpdates bounds the writer child, so that a failpoint the writer never
// reaches ends the child with status 0 (a test failure) instead of a hang.
const maxUpdates = 200

// TestHelperCheckpointWriter is a child: it updates the three files inside
// Begin/Done, alternating versions A and B (maxUpdates times, or once with
// RECOVERY_CP_ONCE), printing "done V" after each Done.
func TestHelperCheckpointWriter(t *testing.T) {
	home := os.Getenv(cpHomeEnv)
	if home == "" {
		return
	}
	for i := range maxUpdates {
		v := "A"
		if i%2 == 1 {
			v = "B"
		}
		cp, err := recovery.Begin(home, "update "+v, three...)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for _, rel := range three {
			if err := atomicfile.WriteFile(filepath.Join(home, rel), []byte("version: "+v+"\n"), 0o600); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
		}
		if err := cp.Done(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("done", v)
		if os.Getenv("RECOVERY_CP_ONCE") != "" {
			break
		}
	}
	os.Exit(0)
}

// TestHelperRecover is a child: it runs recovery.Run on the home, so that
// the rollback itself can be killed at recovery.during-rollback.
func TestHelperRecover(t *testing.T) {
	home := os.Getenv(recoverHomeEnv)
	if home == "" {
		return
	}
	if _, err := recovery.Run(t.Context(), recovery.Options{Home: home}); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

const recoverHomeEnv = "RECOVERY_RUN_HOME"

// versions returns the content of the three files ("" for a missing one).
func versions(t *testing.T, home string) []string {
	var out []string
	for _, rel := range three {
		b, err := os.ReadFile(filepath.Join(home, rel))
		if os.IsNotExist(err) {
			out = append(out, "")
			continue
		}
		require.NoError(t, err)
		out = append(out, string(b))
	}
	return out
}

func allSame(v []string) bool {
	for _, x := range v[1:] {
		if x != v[0] {
			return false
		}
	}
	return true
}

// TestCheckpointAllOrNothing kills a three-file update at every recovery
// and atomicfile failpoint (at several hits) and at random moments, and
// kills the rollback itself; after Run the three files are always all old
// or all new, and never older than the last acknowledged update.
func TestCheckpointAllOrNothing(t *testing.T) {
	var plans []string
	for _, p := range failpoint.Names {
		switch {
		case p == "recovery.during-rollback":
			// Hit by Run, once per open checkpoint: see rollbackPlan.
			plans = append(plans, p+"=kill")
		case strings.HasPrefix(p, "recovery.") || strings.HasPrefix(p, "atomicfile."):
			for _, n := range []int{1, 2, 3, 5, 7} {
				plans = append(plans, fmt.Sprintf("%s=kill@%d", p, n))
			}
		}
	}
	random := 30
	if testing.Short() {
		random = 8
	}
	for range random {
		plans = append(plans, "")
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	for i, plan := range plans {
		home := newHome(t)
		// Start from a committed, consistent version "0" of all three.
		for _, rel := range three {
			put(t, home, rel, []byte("version: 0\n"))
		}
		_, err := recovery.Run(t.Context(), recovery.Options{Home: home})
		require.NoError(t, err)

		writerPlan := plan
		if strings.HasPrefix(plan, "recovery.during-rollback") {
			// Leave an update begun but not done, then kill its rollback.
			writerPlan = "recovery.before-done=kill@3"
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCheckpointWriter$")
		cmd.Env = append(os.Environ(), cpHomeEnv+"="+home)
		if writerPlan != "" {
			cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+writerPlan)
		} else if rng.IntN(3) == 0 {
			cmd.Env = append(cmd.Env, "RECOVERY_CP_ONCE=1")
		}
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		last := "0" // the last acknowledged version
		if writerPlan == "" {
			delay := time.Duration(rng.IntN(20000)) * time.Microsecond // the crash schedule
			timer := time.AfterFunc(delay, func() { cmd.Process.Kill() })
			defer timer.Stop()
		}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			require.False(t, strings.HasPrefix(sc.Text(), "error"), "child: %s", sc.Text())
			last = strings.TrimPrefix(sc.Text(), "done ")
		}
		err = cmd.Wait()
		if writerPlan != "" {
			requireKilled(t, err, writerPlan)
		}
		if writerPlan != plan {
			rec := exec.Command(os.Args[0], "-test.run=^TestHelperRecover$")
			rec.Env = append(os.Environ(), recoverHomeEnv+"="+home, failpoint.EnvVar+"="+plan)
			out, err := rec.Output()
			require.NotContains(t, string(out), "error", "plan %s", plan)
			requireKilled(t, err, plan)
		}

		_, err = recovery.Run(t.Context(), recovery.Options{Home: home})
		require.NoError(t, err, "plan %q", plan)
		got := versions(t, home)
		require.True(t, allSame(got), "plan %d %q (seed %d): torn update %q", i, plan, seed, got)
		// What was acknowledged (Done returned) is never rolled back past;
		// the update after it may have been done but not yet acknowledged.
		assert.Contains(t, []string{"version: " + last + "\n", "version: " + next(last) + "\n"}, got[0],
			"plan %d %q (seed %d): last acknowledged %s", i, plan, seed, last)
	}
}

// next is the version the writer child writes after v.
func next(v string) string {
	if v == "A" {
		return "B"
	}
	return "A"
}

// requireKilled checks that a child armed with plan died by SIGKILL.
func requireKilled(t *testing.T, err error, plan string) {
	t.Helper()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "plan %s: the child was not killed (did the failpoint fire?)", plan)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "plan %s", plan)
}

// TestBeginRemovesWhatItWroteOnError: a Begin that fails (a full disk
// while saving a pre-image) leaves no checkpoint directory for the running
// server to carry until its next start.
func TestBeginRemovesWhatItWroteOnError(t *testing.T) {
	home := newHome(t)
	t.Cleanup(func() { failpoint.Set("") })
	require.NoError(t, failpoint.Set("recovery.begin-after-preimage=error"))
	_, err := recovery.Begin(home, "update", three...)
	require.ErrorIs(t, err, syscall.EIO)
	entries, err := os.ReadDir(filepath.Join(home, recovery.CheckpointsDir))
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestRollbackOfNewFilesReachesDuringRollback: the rollback of an update
// that only created files (every pre-image absent) passes
// recovery.during-rollback after its first file, as one that rewrites
// files does, so a crash test of a server that only adds files reaches it.
func TestRollbackOfNewFilesReachesDuringRollback(t *testing.T) {
	home := newHome(t)
	cp, err := recovery.Begin(home, "add", "config/new.yaml", "config/other.yaml")
	require.NoError(t, err)
	put(t, home, "config/new.yaml", []byte("new: 1\n"))
	put(t, home, "config/other.yaml", []byte("other: 1\n"))
	t.Cleanup(func() { failpoint.Set("") })
	require.NoError(t, failpoint.Set("recovery.during-rollback=error"))
	require.ErrorIs(t, cp.Rollback(), failpoint.ErrInjected)
	assert.NoFileExists(t, filepath.Join(home, "config/new.yaml"), "the first file is removed before the failpoint")
	require.NoError(t, failpoint.Set(""))
	require.NoError(t, cp.Rollback(), "a rollback cut short runs again")
	assert.NoFileExists(t, filepath.Join(home, "config/other.yaml"))
}

// TestRecoveryCommitSaysWhatItDid: recovery's commit tells a person
// reading `git log` what it did: undo an update a crash cut short after
// its commit, naming the update and the commit, or commit a hand edit.
func TestRecoveryCommitSaysWhatItDid(t *testing.T) {
	head := func(t *testing.T, home string) gitstore.Commit {
		s, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
		require.NoError(t, err)
		defer s.Close()
		h, err := s.History("", 1)
		require.NoError(t, err)
		require.Len(t, h, 1)
		return h[0]
	}

	t.Run("an update cut short after its commit", func(t *testing.T) {
		home := newHome(t)
		before := read(t, home, "config/base.yaml")
		_, err := recovery.Begin(home, "add note 494", "config/base.yaml", "config/notes/494.yaml")
		require.NoError(t, err)
		put(t, home, "config/base.yaml", []byte("notes: 494\n"))
		put(t, home, "config/notes/494.yaml", []byte("text: 494\n"))
		s, err := gitstore.Open(filepath.Join(home, "config"), nil)
		require.NoError(t, err)
		undone, err := s.Commit("add note 494")
		require.NoError(t, err)
		require.NoError(t, s.Close()) // the crash: the checkpoint is never done

		_, err = recovery.Run(t.Context(), recovery.Options{Home: home})
		require.NoError(t, err)
		c := head(t, home)
		title, body, _ := strings.Cut(c.Message, "\n\n")
		assert.Equal(t, `recovered: undo "add note 494" (`+undone[:12]+"), cut short by a crash", title)
		assert.Contains(t, body, "config/base.yaml, config/notes/494.yaml")
		assert.Equal(t, before, read(t, home, "config/base.yaml"))
		assert.NoFileExists(t, filepath.Join(home, "config/notes/494.yaml"))
	})
	t.Run("a hand edit", func(t *testing.T) {
		home := newHome(t)
		put(t, home, "config/base.yaml", []byte("edited: by hand\n"))
		_, err := recovery.Run(t.Context(), recovery.Options{Home: home})
		require.NoError(t, err)
		assert.Equal(t, "recovered: commit changes made by hand, or left uncommitted by a crash", head(t, home).Message)
	})
}
