package lifecycle_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
)

const (
	rollbackChildEnv = "LIFECYCLE_ROLLBACK_HOME"
	rollbackRevEnv   = "LIFECYCLE_ROLLBACK_REV"
)

// rollbackChild rolls the home back to the revision in its environment,
// with whatever failpoints its environment arms.
func rollbackChild(home string) int {
	env, closeEnv, err := lifecycle.OpenHome(home, nil)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer closeEnv()
	if _, err := env.Rollback(context.Background(), os.Getenv(rollbackRevEnv)); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// snapshot reads every config file of the work tree (not .git).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// TestRollbackKilledAnywhere: a rollback to a revision that has a file the
// work tree lacks, killed at any point, leaves after the next start's
// recovery either the tree as it was or the tree of the revision, never a
// mix, in the files and in HEAD (a rollback once checkpointed only the
// current files, so a kill left the file it brought back beside the
// current values, and recovery committed that).
func TestRollbackKilledAnywhere(t *testing.T) {
	// The template: a.yaml = 0, then sub/t.yaml added (the target), then
	// a.yaml = x and sub/t.yaml removed (the tree a rollback starts from).
	tmpl := filepath.Join(t.TempDir(), "home")
	_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: tmpl, Schema: 1,
		Defaults: fstest.MapFS{"a.yaml": {Data: []byte("a: 0\n")}}})
	require.NoError(t, err)
	env, closeEnv, err := lifecycle.OpenHome(tmpl, nil)
	require.NoError(t, err)
	target, err := env.Update(t.Context(), "add t", func(tx *lifecycle.Tx) error {
		return tx.WriteFile("sub/t.yaml", []byte("t: 1\n"))
	})
	require.NoError(t, err)
	want := map[string]map[string]string{"target": snapshot(t, env.ConfigDir)}
	_, err = env.Update(t.Context(), "a = x, no t", func(tx *lifecycle.Tx) error {
		if err := tx.Remove("sub/t.yaml"); err != nil {
			return err
		}
		return tx.WriteFile("a.yaml", []byte("a: x\n"))
	})
	require.NoError(t, err)
	want["before"] = snapshot(t, env.ConfigDir)
	require.NoError(t, closeEnv())
	require.NotEqual(t, want["before"], want["target"])

	// Every point of the change path, and of the flush at the close.
	arms := []string{"gitstore.before-intent=kill", "gitstore.after-intent=kill", "gitstore.before-barrier-2=kill",
		"gitstore.flush-after-pack=kill", "gitstore.flush-after-ref=kill", "atomicfile.before-fsync=kill",
		"atomicfile.before-dir-fsync=kill", "atomicfile.before-dir-fsync=kill@2"}
	for n := 1; n <= 3; n++ {
		arms = append(arms, fmt.Sprintf("atomicfile.before-rename=kill@%d", n))
	}
	killed := 0
	for _, arm := range arms {
		t.Run(arm, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			out, err := exec.Command("cp", "-a", tmpl, home).CombinedOutput()
			require.NoError(t, err, "%s", out)

			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), rollbackChildEnv+"="+home, rollbackRevEnv+"="+target,
				failpoint.EnvVar+"="+arm)
			out, err = cmd.CombinedOutput()
			if err != nil {
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				require.True(t, ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL, "child: %v %s", err, out)
				killed++
			} else {
				require.NotContains(t, string(out), "error")
			}

			// The next start.
			lock, err := lifecycle.TryLock(home)
			require.NoError(t, err)
			defer lock.Unlock()
			_, err = recovery.Run(t.Context(), recovery.Options{Home: home})
			require.NoError(t, err)
			got := snapshot(t, filepath.Join(home, "config"))
			msg := gitCLI(t, filepath.Join(home, "config"), "log", "-1", "--format=%s")
			if got["a.yaml"] == want["target"]["a.yaml"] {
				assert.Equal(t, want["target"], got, "rolled back, whole")
				assert.Equal(t, "rollback to "+target+"\n", msg)
			} else {
				assert.Equal(t, want["before"], got, "not rolled back, whole")
				assert.Equal(t, "a = x, no t\n", msg)
			}
			status, err := exec.Command("git", "-C", filepath.Join(home, "config"), "status", "--porcelain").Output()
			require.NoError(t, err)
			assert.Empty(t, strings.TrimSpace(string(status)), "the work tree is committed")
		})
	}
	assert.Greater(t, killed, len(arms)/2, "most arms must kill the rollback")
}
