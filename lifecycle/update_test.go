package lifecycle_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// openUpdateHome installs a home with config/a.yaml = "a: 0" and opens it
// for Env.Update.
func openUpdateHome(t *testing.T) (*lifecycle.Env, string, func() error) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: home, Schema: 1,
		Defaults: fstest.MapFS{"a.yaml": {Data: []byte("a: 0\n")}}})
	require.NoError(t, err)
	env, closeEnv, err := lifecycle.OpenHome(home, nil)
	require.NoError(t, err)
	t.Cleanup(func() { closeEnv() })
	return env, filepath.Join(env.ConfigDir, "a.yaml"), closeEnv
}

func writeA(path, value string) func() error {
	return func() error { return atomicfile.WriteFile(path, []byte("a: "+value+"\n"), 0) }
}

// TestUpdateErrorSaysWhatToDo: an update failed by a disk error names the
// update, its files and what became of them, and the remedy.
func TestUpdateErrorSaysWhatToDo(t *testing.T) {
	env, path, _ := openUpdateHome(t)
	t.Cleanup(func() { failpoint.Set("") })
	require.NoError(t, failpoint.Set("gitstore.before-ref=error"))

	_, err := env.Update(t.Context(), "set a", []string{"a.yaml"}, writeA(path, "1"))
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorIs(t, err, failpoint.ErrInjected)
	assert.Contains(t, err.Error(), "set a failed, "+path+" unchanged; I/O error: the disk may be failing")
	b, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	assert.Equal(t, "a: 0\n", string(b), "rolled back")

	_, err = env.Update(t.Context(), "bad", []string{"a.yaml"}, func() error { return errors.New("not a disk error") })
	assert.EqualError(t, err, "not a disk error", "other errors are left as they are")
}

// TestFailedUpdateIsClosedBeforeTheNext: when a failed update cannot even
// be rolled back (or an update's checkpoint cannot be closed), its
// checkpoint stays open; the next start would roll it back and take every
// later update with it. The next Update closes it first, so what it
// acknowledges survives a restart (found writing the crash suite's fault
// tests).
func TestFailedUpdateIsClosedBeforeTheNext(t *testing.T) {
	for _, tc := range []struct{ name, failpoints, first string }{
		{"rollback fails", "gitstore.before-ref=error@1;recovery.during-rollback=error@1", "0"},
		{"done fails", "recovery.before-done=error@1", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, path, closeEnv := openUpdateHome(t)
			t.Cleanup(func() { failpoint.Set("") })
			require.NoError(t, failpoint.Set(tc.failpoints))
			_, err := env.Update(t.Context(), "one", []string{"a.yaml"}, writeA(path, "1"))
			require.ErrorIs(t, err, syscall.EIO)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "a: "+tc.first+"\n", string(b))

			hash, err := env.Update(t.Context(), "two", []string{"a.yaml"}, writeA(path, "2"))
			require.NoError(t, err)
			require.NotEmpty(t, hash)
			require.NoError(t, closeEnv())

			// The next start.
			lock, err := lifecycle.TryLock(env.Home)
			require.NoError(t, err)
			defer lock.Unlock()
			report, err := recovery.Run(t.Context(), recovery.Options{Home: env.Home})
			require.NoError(t, err)
			assert.True(t, report.Clean(), "%s", report)
			b, err = os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "a: 2\n", string(b), "the acknowledged update survives the restart")
		})
	}
}

// TestUpdatesRollbacksAndReadsAtOnce: a server's clients may update,
// roll back and read history at the same time (helios's stdio and HTTP
// sessions share one Env). Run with -race: the store must not be used by
// two goroutines at once, and every rollback must act on the commit its
// rev named when it began. The home ends committed and clean.
func TestUpdatesRollbacksAndReadsAtOnce(t *testing.T) {
	env, path, closeEnv := openUpdateHome(t)
	_, err := env.Update(t.Context(), "first", []string{"a.yaml"}, writeA(path, "first"))
	require.NoError(t, err)
	require.NoError(t, closeEnv())
	// A packed repository, opened anew: go-git loads a pack's index on its
	// first use, from whichever goroutine gets there first.
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", env.ConfigDir, "gc", "-q").CombinedOutput()
	require.NoError(t, err, "%s", out)
	env, closeEnv, err = lifecycle.OpenHome(env.Home, nil)
	require.NoError(t, err)
	t.Cleanup(func() { closeEnv() })
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			_, err := env.Update(t.Context(), fmt.Sprintf("set %d", i), []string{"a.yaml"}, writeA(path, fmt.Sprint(i)))
			assert.NoError(t, err)
		})
		wg.Go(func() {
			_, err := env.Rollback(t.Context(), "HEAD~1")
			assert.NoError(t, err)
		})
		wg.Go(func() {
			for range 50 {
				_, err := env.Store.History("a.yaml", 0)
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	dirty, err := env.Store.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty, "every change committed")
	require.NoError(t, closeEnv())

	lock, err := lifecycle.TryLock(env.Home)
	require.NoError(t, err)
	defer lock.Unlock()
	report, err := recovery.Run(t.Context(), recovery.Options{Home: env.Home})
	require.NoError(t, err)
	assert.True(t, report.Clean(), "%s", report)
}
