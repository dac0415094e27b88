package gitstore_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
)

// secret is the content of a file outside the work tree that links point
// to: nothing gitstore returns may hold it.
const secret = "PRIVATE KEY 5f0e1d2c\n"

// within runs fn and fails the test if it has not returned after 30 s: a
// commit that waits on a fifo's writer is the bug.
func within(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("still blocked after 30s")
		return nil
	}
}

// lsFiles is `git ls-files -s`: one line per index entry, mode first.
func lsFiles(t *testing.T, dir string) string { return git(t, dir, "ls-files", "-s") }

// TestCommitRefusesWhatIsNotARegularFile: a link to a file outside the work
// tree, one to a file inside it, a link to a directory, a fifo, a socket
// and a file over MaxFileSize are each refused by Commit and Dirty with an
// *atomicfile.RefusedError naming the entry; nothing is committed, no
// commit ever holds a mode 120000 entry, and the fifo blocks nothing.
func TestCommitRefusesWhatIsNotARegularFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "id_ed25519")
	require.NoError(t, os.WriteFile(outside, []byte(secret), 0o600))
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		is   error
	}{
		{"link-out.yaml", func(t *testing.T, p string) { require.NoError(t, os.Symlink(outside, p)) }, atomicfile.ErrNotRegular},
		{"link-in.yaml", func(t *testing.T, p string) { require.NoError(t, os.Symlink("base.yaml", p)) }, atomicfile.ErrNotRegular},
		{"linkdir", func(t *testing.T, p string) { require.NoError(t, os.Symlink(filepath.Dir(outside), p)) }, atomicfile.ErrNotRegular},
		{"pipe.yaml", func(t *testing.T, p string) { require.NoError(t, syscall.Mkfifo(p, 0o600)) }, atomicfile.ErrNotRegular},
		{"s.yaml", func(t *testing.T, p string) {
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("no unix socket at %s: %v", p, err) // a socket's path has a length limit
			}
			t.Cleanup(func() { ln.Close() })
		}, atomicfile.ErrNotRegular},
		{"big.yaml", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("#", 101)), 0o600))
		}, atomicfile.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := gitstore.Init(dir, &gitstore.Options{MaxFileSize: 100})
			require.NoError(t, err)
			defer s.Close()
			write(t, dir, "base.yaml", "name: a\n")
			first, err := s.Commit("one")
			require.NoError(t, err)

			path := filepath.Join(dir, "personas", tc.name)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
			tc.make(t, path)
			write(t, dir, "base.yaml", "name: b\n")
			for fn, call := range map[string]func() error{
				"Commit": func() error { _, err := s.Commit("two"); return err },
				"Dirty":  func() error { _, err := s.Dirty(); return err },
			} {
				err := within(t, call)
				var re *atomicfile.RefusedError
				require.ErrorAs(t, err, &re, fn)
				require.ErrorIs(t, err, tc.is, fn)
				assert.Equal(t, path, re.Path, fn)
				assert.Contains(t, err.Error(), path, "%s names the entry", fn)
				assert.NotContains(t, err.Error(), "PRIVATE KEY", fn)
			}
			head, err := s.Head()
			require.NoError(t, err)
			assert.Equal(t, first, head, "nothing committed")
			assert.NotContains(t, lsFiles(t, dir), "120000")
			assert.NotContains(t, git(t, dir, "ls-tree", "-r", "HEAD"), "120000")

			// Once the entry is gone, the rest commits.
			require.NoError(t, os.Remove(path))
			second, err := s.Commit("two")
			require.NoError(t, err)
			assert.NotEmpty(t, second)
			git(t, dir, "fsck", "--full", "--strict")
		})
	}
}
