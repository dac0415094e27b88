package crashsuite_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFaults injects into a running helios the errors that real disks and
// administrators produce, and checks that the update that meets one fails
// as a tool error naming the file and the remedy, keeps the file's old
// bytes and the history as they were, and leaves the server serving; that
// once the fault is gone the next update works; and that what it
// acknowledged survives a restart into a clean home. At start-up the same
// faults must stop helios with the file and the remedy.
func TestFaults(t *testing.T) {
	b := binaries(t)

	t.Run("ENOSPC from a full tmpfs", func(t *testing.T) {
		needRoot(t, "the ENOSPC test")
		mnt := mountTmpfs(t, "1m")
		home := filepath.Join(mnt, "home")
		filler := filepath.Join(mnt, "filler")
		s := serve(t, b.helios, heliosArgs(t, home), launchOpts{})
		exerciseFault(t, s, home, fault{
			remedy: "the disk holding " + home + " is full: free some space, then retry",
			inject: func() { fill(t, filler) },
			remove: func() { require.NoError(t, os.Remove(filler)) },
		})
		s.stop(t)
		checkAfterFault(t, b, home, heliosArgs(t, home), launchOpts{})

		// A start on a full disk stops with the same remedy.
		fill(t, filler)
		before := treeHash(t, home)
		s = launch(t, b.helios, heliosArgs(t, home), launchOpts{})
		assert.Equal(t, 1, s.wait(t))
		assert.Contains(t, s.stderr.String(), "helios: the disk holding "+home+" is full: free some space, then retry: ")
		assert.Contains(t, s.stderr.String(), home+"/", "names the file")
		assert.Equal(t, before, treeHash(t, home), "a failed start changes nothing")
	})

	t.Run("EROFS from a read-only bind mount", func(t *testing.T) {
		needRoot(t, "the EROFS test")
		home := filepath.Join(t.TempDir(), "home")
		s := serve(t, b.helios, heliosArgs(t, home), launchOpts{})
		var writable func()
		exerciseFault(t, s, home, fault{
			remedy: "the file system holding " + home + " is read-only: remount it read-write, then retry",
			inject: func() { writable = bindReadOnly(t, home) },
			remove: func() { writable() },
		})
		s.stop(t)
		checkAfterFault(t, b, home, heliosArgs(t, home), launchOpts{})
	})

	t.Run("EROFS at start-up", func(t *testing.T) {
		needRoot(t, "the EROFS test")
		home := filepath.Join(t.TempDir(), "home")
		serve(t, b.helios, heliosArgs(t, home), launchOpts{}).stop(t)
		before := treeHash(t, home)
		bindReadOnly(t, home)
		s := launch(t, b.helios, heliosArgs(t, home), launchOpts{})
		assert.Equal(t, 1, s.wait(t))
		assert.Contains(t, s.stderr.String(), "helios: the file system holding "+home+" is read-only: remount it read-write, then retry: ")
		assert.Contains(t, s.stderr.String(), home+"/", "names the file")
		assert.Equal(t, before, treeHash(t, home))
	})

	// helios runs as nobody on nobody's home; then root takes back a
	// directory (writes fail) or a file (reads fail too), as a stray sudo
	// does.
	for _, tc := range []struct {
		name       string
		unreadable bool
	}{{"EACCES writing as an unprivileged user", false}, {"EACCES reading as an unprivileged user", true}} {
		t.Run(tc.name, func(t *testing.T) {
			needRoot(t, "the EACCES test (root ignores file modes, so it runs helios as uid 65534)")
			dir := nobodyDir(t)
			home := filepath.Join(dir, "home")
			require.NoError(t, os.Mkdir(home, 0o700))
			require.NoError(t, os.Chown(home, int(nobody.Uid), int(nobody.Gid)))
			as := launchOpts{cred: &nobody}
			args := []string{"--home", home, "--registry", filepath.Join(dir, "servers.json")}
			s := serve(t, b.helios, args, as)
			// personas/ stays readable (0755) but only root may write it;
			// default.yaml keeps its 0600, so only root may read it.
			taken, mode := filepath.Join(home, "config", "personas"), os.FileMode(0o755)
			if tc.unreadable {
				taken, mode = filepath.Join(taken, "default.yaml"), 0o600
			}
			fi, err := os.Stat(taken)
			require.NoError(t, err)
			exerciseFault(t, s, home, fault{
				remedy:     "permission denied: run the server as the owner of " + home + ", or give that user back the file named here",
				unreadable: tc.unreadable,
				inject: func() {
					require.NoError(t, os.Chown(taken, 0, 0))
					require.NoError(t, os.Chmod(taken, mode))
				},
				remove: func() {
					require.NoError(t, os.Chown(taken, int(nobody.Uid), int(nobody.Gid)))
					require.NoError(t, os.Chmod(taken, fi.Mode().Perm()))
				},
			})
			s.stop(t)
			checkAfterFault(t, b, home, args, as)
		})
	}

	t.Run("EACCES at start-up on another user's home", func(t *testing.T) {
		needRoot(t, "the EACCES test (root ignores file modes, so it runs helios as uid 65534)")
		dir := nobodyDir(t)
		home := filepath.Join(dir, "home")
		serve(t, b.helios, heliosArgs(t, home), launchOpts{}).stop(t) // root's home
		before := treeHash(t, home)
		s := launch(t, b.helios, []string{"--home", home, "--registry", filepath.Join(dir, "servers.json")}, launchOpts{cred: &nobody})
		assert.Equal(t, 1, s.wait(t))
		assert.Contains(t, s.stderr.String(), "is not writable by this user (uid 65534); run as the home's owner or use another home")
		assert.Equal(t, before, treeHash(t, home))
	})

	t.Run("EIO from the failpoint error action", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "home")
		serve(t, b.helios, heliosArgs(t, home), launchOpts{}).stop(t) // install
		// The second update fails before its first barrier returns: its
		// journal record is cut back, nothing of it reaches the files.
		s := serve(t, b.helios, heliosArgs(t, home), launchOpts{failpoints: "gitstore.before-intent=error@2"})
		exerciseFault(t, s, home, fault{
			remedy: "I/O error: the disk may be failing: check the kernel log (dmesg), copy " + home + " somewhere safe",
			inject: func() {},
			remove: func() {},
		})
		s.stop(t)
		checkAfterFault(t, b, home, heliosArgs(t, home), launchOpts{})
	})
}

// fault is one fault a test injects into a running helios.
type fault struct {
	remedy string // what the tool error must say to do
	// unreadable: the fault stops reads too, so the update fails reading
	// the file, before it begins, and so does get_config.
	unreadable     bool
	inject, remove func()
}

// exerciseFault makes one update, injects f, checks the update that meets
// it, removes f and makes another update, which must work.
func exerciseFault(t *testing.T, s *server, home string, f fault) {
	t.Helper()
	file := filepath.Join(home, "config", "personas", "default.yaml")
	head := commitOf(t, s.update(t, "default", "tone", "before"))
	before := readFile(t, file)
	// The git CLI sees the commit once the server flushes its journal
	// (after a quiet 20 ms): wait for it, so that HEAD is a fixed point.
	require.Eventually(t, func() bool { return gitHead(t, home) == head }, time.Minute, 5*time.Millisecond)

	f.inject()
	r := s.update(t, "default", "tone", "during")
	require.True(t, r.IsError, "the update must fail: %s", r.Text())
	// A client is told the file relative to config/ (Env.ToolError).
	rel := "personas/default.yaml"
	if f.unreadable {
		assert.Contains(t, r.Text(), f.remedy+": open "+rel+": ", "names the file")
	} else {
		assert.Contains(t, r.Text(), "update_preference default.tone failed, "+rel+" ", "names the update and the file")
		assert.Contains(t, r.Text(), f.remedy)
	}
	assert.Equal(t, before, readFile(t, file), "the old bytes are intact")
	assert.Equal(t, head, gitHead(t, home), "nothing was committed")
	require.True(t, s.running(), "the server keeps running; stderr:\n%s", s.stderr.String())
	read := "get_config"
	if f.unreadable {
		read = "list_personas"
	}
	rr := s.call(t, read, map[string]any{})
	assert.False(t, rr.IsError, "the server still answers %s: %s", read, rr.Text())

	f.remove()
	commitOf(t, s.update(t, "default", "tone", "after"))
}

// checkAfterFault restarts helios with args: the last acknowledged value
// is there, and mcpkeep doctor finds a clean home.
func checkAfterFault(t *testing.T, b binSet, home string, args []string, o launchOpts) {
	t.Helper()
	s := serve(t, b.helios, args, o)
	r := s.call(t, "get_persona", map[string]any{"name": "default"})
	require.False(t, r.IsError, r.Text())
	assert.Contains(t, string(r.Structured), `"tone":"after"`, "the acknowledged value survived the restart")
	s.stop(t)
	assert.NoError(t, checker{mcpkeep: b.mcpkeep}.doctor(t.Context(), home))
}

// nobody is the unprivileged user the EACCES tests run helios as.
var nobody = syscall.Credential{Uid: 65534, Gid: 65534}

// nobodyDir returns a temporary directory owned by nobody, who may reach
// it: the test's own temporary directory is 0700.
func nobodyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chown(dir, int(nobody.Uid), int(nobody.Gid)))
	return dir
}

// fill writes to path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	for len(buf) > 1 { // the last few bytes
		buf = buf[:len(buf)/2]
		f.Write(buf)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func gitHead(t *testing.T, home string) string {
	t.Helper()
	out, err := git(t.Context(), filepath.Join(home, "config"), nil, "rev-parse", "HEAD")
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// treeHash hashes the names, modes and bytes of everything under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", rel(dir, p), info.Mode())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	}))
	return fmt.Sprintf("%x", h.Sum(nil))
}
