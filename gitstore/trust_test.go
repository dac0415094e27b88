package gitstore_test

import (
	"errors"
	"net"
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

// symlinkHistory makes a store whose history holds, as its last commit,
// what a store never commits: personas/evil.yaml, a link to a file outside
// the work tree, added with the git CLI beside a regular file. It returns
// the store, the work tree, the commit before the link and the one with it.
func symlinkHistory(t *testing.T) (*gitstore.Store, string, string, string) {
	t.Helper()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "id_ed25519")
	require.NoError(t, os.WriteFile(outside, []byte(secret), 0o600))
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	write(t, dir, "personas/default.yaml", "name: default\n")
	before, err := s.Commit("one")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "personas", "evil.yaml")))
	write(t, dir, "personas/default.yaml", "name: changed\n")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a link, by hand")
	require.Contains(t, lsFiles(t, dir), "120000", "the git CLI commits the link")
	with := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
	// Then the link removed again, by hand too: the work tree and HEAD
	// are as before it.
	require.NoError(t, os.Remove(filepath.Join(dir, "personas", "evil.yaml")))
	write(t, dir, "personas/default.yaml", "name: default\n")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the link removed")
	s, err = gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, dir, before, with
}

// TestHistoryWithASymlink: a history that already holds a link (made with
// the git CLI): ReadAt, Restore and Rollback to it are refused with an
// *EntryError that names the entry and the revision, and the work tree and
// HEAD are left as they were.
func TestHistoryWithASymlink(t *testing.T) {
	s, dir, _, with := symlinkHistory(t)
	head, err := s.Head()
	require.NoError(t, err)
	tree := dirHash(t, dir)

	_, err = s.ReadAt(with, "personas/evil.yaml")
	requireEntryError(t, err, with, "personas/evil.yaml", atomicfile.ErrNotRegular)
	err = s.Restore("personas/evil.yaml", with)
	requireEntryError(t, err, with, "personas/evil.yaml", atomicfile.ErrNotRegular)
	_, err = s.Rollback(with, "rollback")
	requireEntryError(t, err, with, "personas/evil.yaml", atomicfile.ErrNotRegular)
	assert.Contains(t, err.Error(), "is a symbolic link")
	assert.Contains(t, err.Error(), "nothing was written")
	assert.NotContains(t, err.Error(), "id_ed25519", "the link's target is not quoted")

	after, err := s.Head()
	require.NoError(t, err)
	assert.Equal(t, head, after, "no commit")
	assert.Equal(t, tree, dirHash(t, dir), "the work tree is unchanged: the regular file of that revision was not written either")
	b, err := s.ReadAt(with, "personas/default.yaml")
	require.NoError(t, err, "the regular files of that revision can still be read")
	assert.Equal(t, "name: changed\n", string(b))
	require.NoError(t, s.Restore("personas/default.yaml", with), "and restored one by one")
}

func requireEntryError(t *testing.T, err error, rev, path string, is error) {
	t.Helper()
	var ee *gitstore.EntryError
	require.ErrorAs(t, err, &ee)
	require.ErrorIs(t, err, gitstore.ErrRefusedEntry)
	require.ErrorIs(t, err, is)
	assert.Equal(t, rev, ee.Rev)
	assert.Equal(t, path, ee.Path)
	assert.Contains(t, err.Error(), `"`+path+`"`)
	assert.Contains(t, err.Error(), rev)
}

// TestHistoryWithUnsafePaths: trees made with git mktree whose entries are
// named to lead out of the work tree or into a .git (.., .GIT, a .git
// below) are refused by ReadAt, Restore and Rollback, before anything is
// written; so is a file larger than MaxFileSize, and a file that a link in
// the work tree would lead a write through.
func TestHistoryWithUnsafePaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry string // the name in the top tree; "sub" holds a file named file
		file  string // the file's path
	}{
		{"dot-dot", "..", "../file"},
		{"upper-case .git", ".GIT", ".GIT/file"},
		{"nested .git", "sub", "sub/.git/file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := gitstore.Init(dir, nil)
			require.NoError(t, err)
			defer s.Close()
			write(t, dir, "base.yaml", "name: a\n")
			_, err = s.Commit("one")
			require.NoError(t, err)
			blob := strings.TrimSpace(gitIn(t, dir, "hash-object -w --stdin", "evil: true\n"))
			inner := strings.TrimSpace(gitIn(t, dir, "mktree", "100644 blob "+blob+"\tfile\n"))
			if tc.name == "nested .git" {
				inner = strings.TrimSpace(gitIn(t, dir, "mktree", "040000 tree "+inner+"\t.git\n"))
			}
			top := strings.TrimSpace(gitIn(t, dir, "mktree", "040000 tree "+inner+"\t"+tc.entry+"\n"))
			commit := strings.TrimSpace(git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", top, "-m", "evil", "-p", "HEAD"))
			git(t, dir, "update-ref", "refs/tags/evil", commit)
			tree := dirHash(t, filepath.Dir(dir))

			// go-git refuses these names itself when it walks the tree;
			// gitstore checks each path again before it writes.
			_, err = s.ReadAt("evil", tc.file)
			require.Error(t, err)
			require.Error(t, s.Restore(tc.file, "evil"))
			_, err = s.Rollback("evil", "rollback")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "rollback to evil")
			assert.Contains(t, err.Error(), "nothing was written")
			assert.Equal(t, tree, dirHash(t, filepath.Dir(dir)), "nothing written, in the work tree or beside it")
		})
	}

	t.Run("too large", func(t *testing.T) {
		dir := t.TempDir()
		s, err := gitstore.Init(dir, &gitstore.Options{MaxFileSize: 10})
		require.NoError(t, err)
		defer s.Close()
		write(t, dir, "a.yaml", "v: 1\n")
		_, err = s.Commit("one")
		require.NoError(t, err)
		write(t, dir, "a.yaml", strings.Repeat("#", 11))
		git(t, dir, "add", "-A")
		git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "big, by hand")
		write(t, dir, "a.yaml", "v: 1\n")
		tree := dirHash(t, dir)
		_, err = s.ReadAt("HEAD", "a.yaml")
		requireEntryError(t, err, "HEAD", "a.yaml", atomicfile.ErrTooLarge)
		_, err = s.Rollback("HEAD", "rollback")
		requireEntryError(t, err, "HEAD", "a.yaml", atomicfile.ErrTooLarge)
		assert.Equal(t, tree, dirHash(t, dir))
	})

	t.Run("through a link in the work tree", func(t *testing.T) {
		dir := t.TempDir()
		elsewhere := t.TempDir()
		s, err := gitstore.Init(dir, nil)
		require.NoError(t, err)
		defer s.Close()
		write(t, dir, "personas/a.yaml", "v: 1\n")
		first, err := s.Commit("one")
		require.NoError(t, err)
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "personas")))
		require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, "personas")))
		err = s.Restore("personas/a.yaml", first)
		requireEntryError(t, err, first, "personas/a.yaml", gitstore.ErrUnsafePath)
		assert.Contains(t, err.Error(), "personas, which is a symbolic link")
		_, err = s.Rollback(first, "rollback")
		require.True(t, errors.Is(err, gitstore.ErrUnsafePath) || errors.Is(err, atomicfile.ErrNotRegular), "refused: %v", err)
		entries, err := os.ReadDir(elsewhere)
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing written through the link")
	})
}

func execGit(dir string, args ...string) *exec.Cmd {
	return exec.Command("git", append([]string{"-C", dir}, args...)...)
}

// gitIn runs git with args (split on spaces) and stdin.
func gitIn(t *testing.T, dir, args, stdin string) string {
	t.Helper()
	cmd := execGit(dir, strings.Fields(args)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", args, out)
	return string(out)
}

// TestSafePath: the paths a history may name for the work tree. go-git's
// tree walk refuses most unsafe names first; gitstore checks each path
// again before it writes.
func TestSafePath(t *testing.T) {
	for p, want := range map[string]bool{
		"base.yaml": true, "personas/a.yaml": true, ".gitignore": true, "a/.github/x": true, "..a": true,
		"": false, "..": false, "../x": false, "a/../../x": false, "/etc/passwd": false, "a//b": false, "./a": false,
		".git/config": false, ".GIT/config": false, "a/.Git/hooks/x": false, "a/b/.git": false, "a\x00b": false,
	} {
		assert.Equal(t, want, gitstore.SafePath(p), "%q", p)
	}
}

// TestCommitCheckedLeavesOut: CommitChecked commits the hand edits it can
// and leaves out, each as the last commit had it, what Commit refuses (a
// link to a file, a link where a directory was, a fifo, a file over
// MaxFileSize) and a changed file check refuses; its error is a
// *LeftOutError naming each, with the commit of the rest. A file check
// refuses that did not change since the last commit is not checked.
func TestCommitCheckedLeavesOut(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "id_ed25519")
	require.NoError(t, os.WriteFile(outside, []byte(secret), 0o600))
	dir := t.TempDir()
	s, err := gitstore.Init(dir, &gitstore.Options{MaxFileSize: 100})
	require.NoError(t, err)
	defer s.Close()
	write(t, dir, "a.yaml", "a: 1\n")
	write(t, dir, "old-bad.yaml", "bad, but committed before\n")
	write(t, dir, "d/x.yaml", "x: 1\n")
	write(t, dir, "big.yaml", "b: 1\n")
	_, err = s.Commit("one")
	require.NoError(t, err)

	write(t, dir, "a.yaml", "bad: edit\n")
	write(t, dir, "new.yaml", "new: 1\n")
	write(t, dir, "new-bad.yaml", "bad: new\n")
	write(t, dir, "big.yaml", strings.Repeat("#", 101))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link.yaml")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "d")))
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(dir, "d")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o600))
	// A file the commit had, now a directory holding a refused file,
	// and a link whose name go-git's own path check would refuse.
	require.NoError(t, os.Remove(filepath.Join(dir, "old-bad.yaml")))
	write(t, dir, "old-bad.yaml/ok.yaml", "ok: 1\n")
	write(t, dir, "old-bad.yaml/bad.yaml", "bad: inside\n")
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "l\tink.yaml")))

	var checked []string
	check := func(path string, data []byte) error {
		checked = append(checked, path)
		if strings.HasPrefix(string(data), "bad") {
			return errors.New("refused by check")
		}
		return nil
	}
	var hash string
	err = within(t, func() error { var err error; hash, err = s.CommitChecked("hand edits", check); return err })
	var le *gitstore.LeftOutError
	require.ErrorAs(t, err, &le)
	require.NotEmpty(t, hash, "the rest is committed")
	assert.Equal(t, hash, le.Commit)
	why := map[string]string{}
	for _, f := range le.Files {
		why[f.Path] = f.Err.Error()
	}
	assert.Len(t, why, 8, "%v", why)
	for _, p := range []string{"a.yaml", "new-bad.yaml", "old-bad.yaml/bad.yaml"} {
		assert.Equal(t, "refused by check", why[p], p)
	}
	for _, p := range []string{"link.yaml", "d", "pipe.yaml", "big.yaml", "l\tink.yaml"} {
		assert.Contains(t, why[p], filepath.Join(dir, p), p)
	}
	assert.ElementsMatch(t, []string{"a.yaml", "new.yaml", "new-bad.yaml", "old-bad.yaml/ok.yaml", "old-bad.yaml/bad.yaml"}, checked,
		"only the files that changed are checked")
	assert.NotContains(t, err.Error(), "PRIVATE KEY")

	tree := git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")
	assert.Equal(t, "a.yaml\nbig.yaml\nd/x.yaml\nnew.yaml\nold-bad.yaml/ok.yaml\n", tree)
	for p, want := range map[string]string{"a.yaml": "a: 1\n", "big.yaml": "b: 1\n", "d/x.yaml": "x: 1\n", "new.yaml": "new: 1\n"} {
		assert.Equal(t, want, git(t, dir, "show", "HEAD:"+p), p)
	}
	git(t, dir, "fsck", "--full", "--strict")

	// Nothing else to commit: no commit, the same files left out.
	again, err := s.CommitChecked("again", check)
	require.ErrorAs(t, err, &le)
	assert.Empty(t, again)
	assert.Len(t, le.Files, 8)
	// git sees the left-out paths as changed, the rest as committed.
	status := git(t, dir, "status", "--porcelain", "--untracked-files=all")
	assert.Contains(t, status, " M a.yaml\n")
	assert.Contains(t, status, "?? new-bad.yaml\n")
	assert.Contains(t, status, "?? old-bad.yaml/bad.yaml\n")
	assert.NotContains(t, status, " new.yaml\n")
	assert.NotContains(t, status, "ok.yaml")
}
