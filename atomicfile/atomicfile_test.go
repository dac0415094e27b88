package atomicfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

var (
	oldBytes = bytes.Repeat([]byte("old "), 1000)
	newBytes = bytes.Repeat([]byte("NEW!"), 3000)
)

const targetEnv = "ATOMICFILE_TARGET"

// TestHelperWriter is a child: it replaces the target with newBytes, with
// whatever failpoint its environment arms.
func TestHelperWriter(t *testing.T) {
	path := os.Getenv(targetEnv)
	if path == "" {
		return
	}
	if err := atomicfile.WriteFile(path, newBytes, 0o600); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func atomicfilePoints() []string {
	var out []string
	for _, n := range failpoint.Names {
		if filepath.Ext(n) != "" && n[:len("atomicfile.")] == "atomicfile." {
			out = append(out, n)
		}
	}
	return out
}

// TestKillAtEveryFailpoint: a writer SIGKILLed at any point leaves the
// old or the new bytes, never a mix; CleanTemps then removes its orphan,
// which must be in the target's directory (not in /tmp, out of its reach).
func TestKillAtEveryFailpoint(t *testing.T) {
	// What a kill at each point leaves: the bytes, and whether a temporary
	// file is orphaned.
	want := map[string]struct {
		bytes  []byte
		orphan bool
	}{
		"atomicfile.before-write":     {oldBytes, false}, // no temp file yet
		"atomicfile.before-fsync":     {oldBytes, true},
		"atomicfile.before-rename":    {oldBytes, true},
		"atomicfile.before-dir-fsync": {newBytes, false}, // renamed already
	}
	points := atomicfilePoints()
	require.Len(t, points, len(want))
	for _, p := range points {
		t.Run(p, func(t *testing.T) {
			w, ok := want[p]
			require.True(t, ok, "no expectation for failpoint %s", p)
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			require.NoError(t, os.WriteFile(path, oldBytes, 0o600))
			user := filepath.Join(dir, ".keep")
			require.NoError(t, os.WriteFile(user, []byte("mine"), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600))

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
			cmd.Env = append(os.Environ(), targetEnv+"="+path, failpoint.EnvVar+"="+p+"=kill")
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child died by SIGKILL at %s", p)

			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(w.bytes, got), "after a kill at %s: %d bytes, want the %d bytes of the old or new version", p, len(got), len(w.bytes))

			removed, err := atomicfile.CleanTemps(dir)
			require.NoError(t, err)
			if w.orphan {
				assert.Len(t, removed, 1, "the killed write's temporary file, in the target's directory")
			} else {
				assert.Empty(t, removed)
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			assert.ElementsMatch(t, []string{"config.yaml", ".keep", "notes.txt"}, names, "removed %v", removed)
		})
	}
}

func TestErrorAtEveryFailpoint(t *testing.T) {
	for _, p := range atomicfilePoints() {
		t.Run(p, func(t *testing.T) {
			require.NoError(t, failpoint.Set(p+"=error"))
			t.Cleanup(func() { failpoint.Set("") })
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			require.NoError(t, os.WriteFile(path, oldBytes, 0o600))

			err := atomicfile.WriteFile(path, newBytes, 0)
			if p == "atomicfile.before-dir-fsync" {
				// The rename happened: the new bytes are in place, but not
				// known durable, and the caller is told.
				require.ErrorIs(t, err, syscall.EIO)
				return
			}
			require.ErrorIs(t, err, syscall.EIO)
			var pe *os.PathError
			require.ErrorAs(t, err, &pe)
			assert.Contains(t, err.Error(), dir, "the error names the file")
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, oldBytes, got, "the old bytes are intact")
			entries, _ := os.ReadDir(dir)
			assert.Len(t, entries, 1, "no temp file left behind")
		})
	}
}

// TestConcurrentReaderNeverSeesTornFile rewrites a file 10,000 times with
// two contents of different lengths while a reader reads it.
func TestConcurrentReaderNeverSeesTornFile(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	path := filepath.Join(t.TempDir(), "state.json")
	a, b := []byte(`{"v":"a"}`), bytes.Repeat([]byte("b"), 5000)
	require.NoError(t, atomicfile.WriteFile(path, a, 0o600))
	var done atomic.Bool
	var reads, bad atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !done.Load() {
			got, err := os.ReadFile(path)
			reads.Add(1)
			if err != nil || !(bytes.Equal(got, a) || bytes.Equal(got, b)) {
				bad.Add(1)
			}
		}
	})
	for i := range n {
		data := a
		if i%2 == 1 {
			data = b
		}
		require.NoError(t, atomicfile.WriteFile(path, data, 0o600))
	}
	done.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load(), "torn, empty or missing reads out of %d", reads.Load())
	assert.Positive(t, reads.Load())
}

func TestPermissions(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, atomicfile.WriteFile(p, []byte("x"), 0))
	assert.Equal(t, atomicfile.DefaultPerm, mode(t, p), "new file, perm 0")

	require.NoError(t, os.Chmod(p, 0o640))
	require.NoError(t, atomicfile.WriteFile(p, []byte("y"), 0))
	assert.Equal(t, os.FileMode(0o640), mode(t, p), "existing mode kept with perm 0")

	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	require.NoError(t, atomicfile.WriteFile(p, []byte("z"), 0o644))
	assert.Equal(t, os.FileMode(0o644), mode(t, p), "perm given: exactly, whatever the umask")
}

func mode(t *testing.T, p string) os.FileMode {
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func TestSymlinkReplacedNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("keep"), 0o644))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, atomicfile.WriteFile(link, []byte("new"), 0o600))
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b))
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
}

func TestBackupNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	backups := filepath.Join(dir, "backups")
	require.NoError(t, os.Mkdir(backups, 0o700))
	var names []string
	for i := range 5 {
		require.NoError(t, os.WriteFile(p, fmt.Appendf(nil, "v%d", i), 0o640))
		name, err := atomicfile.Backup(p, backups)
		require.NoError(t, err)
		names = append(names, name)
	}
	for i, name := range names {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("v%d", i), string(b))
		assert.Equal(t, os.FileMode(0o640), mode(t, name))
	}
	// Two copies under one name: the second gets a suffix.
	first, err := atomicfile.CopyNew(filepath.Join(dir, "same"), []byte("1"), 0)
	require.NoError(t, err)
	second, err := atomicfile.CopyNew(filepath.Join(dir, "same"), []byte("2"), 0)
	require.NoError(t, err)
	assert.NotEqual(t, first, second)
	b, _ := os.ReadFile(first)
	assert.Equal(t, "1", string(b))
	_, err = atomicfile.Backup(filepath.Join(dir, "missing"), "")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestMkdirAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, atomicfile.MkdirAll(dir, 0))
	assert.Equal(t, os.FileMode(0o700), mode(t, dir))
	require.NoError(t, atomicfile.MkdirAll(dir, 0), "existing is fine")
	f := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	assert.Error(t, atomicfile.MkdirAll(f, 0))
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".config.yaml.mcpkeep-tmp1234567890123456789": true,
		".state.json.mcpkeep-tmp987654321098765":      true,
		".6a6bbd35e6.mcpkeep-tmp42":                   true, // a short random number
		".keep":                                       false,
		"notes.txt":                                   false,
		".cache-12345":                                false,
		"config.yaml.mcpkeep-tmp1234567890123456789":  false, // not hidden
		".config.yaml.mcpkeep-tmp":                    false, // no digits
		".config.yaml.mcpkeep-tmp123.bak":             false,
		".mcpkeep-tmp123":                             false, // no target name
		// Names that look random but are a user's: renameio's own
		// format, which this package used to match.
		".log.20240101123045123":          false,
		".config.yaml4242424242424242424": false,
	} {
		assert.Equal(t, want, atomicfile.IsTemp(name), name)
	}
}

// TestCleanTempsKeepsUserFiles: a file that merely ends in many digits,
// such as a rotated log, is a user's file; CleanTemps removes only the
// temporary files WriteFile names as its own.
func TestCleanTempsKeepsUserFiles(t *testing.T) {
	dir := t.TempDir()
	users := []string{".log.20240101123045123", ".config.yaml4242424242424242424", ".keep", "notes.txt"}
	for _, name := range users {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("mine"), 0o600))
	}
	orphan := filepath.Join(dir, ".config.yaml.mcpkeep-tmp4242424242424242424")
	require.NoError(t, os.WriteFile(orphan, []byte("half"), 0o600))

	removed, err := atomicfile.CleanTemps(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{orphan}, removed)
	for _, name := range users {
		assert.FileExists(t, filepath.Join(dir, name), "a user's file is kept")
	}
}

// TestTempFileNames: the temporary file of a write (seen by killing the
// writer before its rename) carries the marker IsTemp recognizes, and sits
// beside its target, even when the target's own name ends in digits.
func TestTempFileNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".log.20240101123045123")
	require.NoError(t, os.WriteFile(path, oldBytes, 0o600))
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
	cmd.Env = append(os.Environ(), targetEnv+"="+path, failpoint.EnvVar+"=atomicfile.before-rename=kill")
	require.Error(t, cmd.Run())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var temps []string
	for _, e := range entries {
		if e.Name() != filepath.Base(path) {
			temps = append(temps, e.Name())
		}
	}
	require.Len(t, temps, 1)
	assert.Regexp(t, `^\.\.log\.20240101123045123\.mcpkeep-tmp[0-9]+$`, temps[0])
	assert.True(t, atomicfile.IsTemp(temps[0]))
	assert.False(t, atomicfile.IsTemp(filepath.Base(path)), "the target itself is not a temp file")
}

func TestCleanTempsMissingDir(t *testing.T) {
	_, err := atomicfile.CleanTemps(filepath.Join(t.TempDir(), "nope"))
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

// TestCleanTempsOf: only the temporary files of the one file named are
// removed; those of its neighbours, even of names that begin with its
// own, and the user's files are kept.
func TestCleanTempsOf(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "servers.json")
	own := []string{".servers.json.mcpkeep-tmp42", ".servers.json.mcpkeep-tmp4242424242424242424"}
	others := []string{
		"servers.json",
		"servers.json.lock",
		".servers.json.bak.mcpkeep-tmp42",          // of servers.json.bak
		".servers.json.mcpkeep-tmp42.mcpkeep-tmp7", // of a file named like a temporary one
		".other.json.mcpkeep-tmp42",                // of a neighbour
		".servers.json.mcpkeep-tmp",                // no digits
		".servers.json4242424242424242424",         // renameio's own form
		"servers.json.corrupt-20260101T000000.000000000Z",
	}
	for _, name := range append(slices.Clone(own), others...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	removed, err := atomicfile.CleanTempsOf(path)
	require.NoError(t, err)
	var want []string
	for _, name := range own {
		want = append(want, filepath.Join(dir, name))
	}
	assert.ElementsMatch(t, want, removed)
	for _, name := range others {
		assert.FileExists(t, filepath.Join(dir, name), "kept")
	}
	removed, err = atomicfile.CleanTempsOf(path)
	require.NoError(t, err)
	assert.Empty(t, removed, "nothing more to remove")
	_, err = atomicfile.CleanTempsOf(filepath.Join(dir, "nope", "x"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
