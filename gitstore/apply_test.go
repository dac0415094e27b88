package gitstore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/barrier"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// initWith makes a repository holding files, committed, and returns it
// open.
func initWith(t *testing.T, files map[string]string) (*gitstore.Store, string) {
	t.Helper()
	dir := t.TempDir()
	for rel, data := range files {
		write(t, dir, rel, data)
	}
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	if len(files) > 0 {
		_, err = s.Commit("init")
		require.NoError(t, err)
	}
	return s, dir
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) {
		return "<none>"
	}
	require.NoError(t, err)
	return string(b)
}

func stage(t *testing.T, s *gitstore.Store, msg string, changes ...gitstore.Change) *gitstore.Staged {
	t.Helper()
	c, err := s.Stage(msg, changes)
	require.NoError(t, err)
	require.NotNil(t, c, "%s changes the tree", msg)
	return c
}

func put(path, data string) gitstore.Change { return gitstore.Change{Path: path, Data: []byte(data)} }
func del(path string) gitstore.Change       { return gitstore.Change{Path: path, Remove: true} }

// TestStageApply: staged commits are built on one another, each with its
// own message, written by one Apply; the work tree, this store's history
// and, after a flush, the git CLI agree, with a clean status and fsck.
func TestStageApply(t *testing.T) {
	s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n", "sub/b.yaml": "b: 0\n", "gone.yaml": "x\n"})
	c1 := stage(t, s, "one", put("a.yaml", "a: 1\n"), put("new/deep/n.yaml", "n: 1\n"))
	c2 := stage(t, s, "two", put("a.yaml", "a: 2\n"), del("gone.yaml"), del("sub/b.yaml"))
	done, _ := c1.Result()
	assert.False(t, done, "staged, not applied")
	assert.Equal(t, "a: 0\n", read(t, dir, "a.yaml"), "nothing written before Apply")

	require.NoError(t, s.Apply())
	for _, c := range []*gitstore.Staged{c1, c2} {
		done, err := c.Result()
		assert.True(t, done)
		assert.NoError(t, err)
	}
	assert.Equal(t, "a: 2\n", read(t, dir, "a.yaml"))
	assert.Equal(t, "n: 1\n", read(t, dir, "new/deep/n.yaml"))
	assert.Equal(t, "<none>", read(t, dir, "gone.yaml"))
	assert.Equal(t, "<none>", read(t, dir, "sub/b.yaml"))
	head, err := s.Head()
	require.NoError(t, err)
	assert.Equal(t, c2.Hash(), head)
	hist, err := s.History("", 0)
	require.NoError(t, err)
	require.Len(t, hist, 3)
	assert.Equal(t, []string{"two", "one", "init"}, []string{hist[0].Message, hist[1].Message, hist[2].Message})
	at1, err := s.ReadAt(c1.Hash(), "a.yaml")
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", string(at1))
	dirty, err := s.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty)

	require.NoError(t, s.Flush())
	assert.Equal(t, c2.Hash(), strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")))
	assert.Equal(t, "two\none\ninit\n", git(t, dir, "log", "--format=%s"))
	assert.Empty(t, git(t, dir, "status", "--porcelain"))
	git(t, dir, "fsck", "--full", "--strict")
}

// TestStageLeavesHandEditsOut: a commit holds the parent's tree and the
// staged paths, not a file changed by hand beside them.
func TestStageLeavesHandEditsOut(t *testing.T) {
	s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n", "b.yaml": "b: 0\n"})
	write(t, dir, "b.yaml", "b: by hand\n")
	write(t, dir, "c.yaml", "c: by hand\n")
	c := stage(t, s, "a", put("a.yaml", "a: 1\n"))
	require.NoError(t, s.Apply())
	b, err := s.ReadAt(c.Hash(), "b.yaml")
	require.NoError(t, err)
	assert.Equal(t, "b: 0\n", string(b))
	_, err = s.ReadAt(c.Hash(), "c.yaml")
	require.ErrorIs(t, err, fs.ErrNotExist)
	dirty, err := s.Dirty()
	require.NoError(t, err)
	assert.True(t, dirty, "the hand edits wait for a Commit")
	h, err := s.Commit("hand edits")
	require.NoError(t, err)
	b, err = s.ReadAt(h, "b.yaml")
	require.NoError(t, err)
	assert.Equal(t, "b: by hand\n", string(b))
}

// TestStageNothingAndBadPaths: changes that leave the tree as it is stage
// nothing; a bad path, or a file where the tree has a directory, is
// ErrBadPath and stages nothing.
func TestStageNothingAndBadPaths(t *testing.T) {
	s, _ := initWith(t, map[string]string{"a.yaml": "a: 0\n", "d/x.yaml": "x\n"})
	c, err := s.Stage("same", []gitstore.Change{put("a.yaml", "a: 0\n"), del("missing.yaml")})
	require.NoError(t, err)
	assert.Nil(t, c)
	for _, p := range []string{"", "/abs", "../out", ".git/config", "a/../../x", "d", "a.yaml/under",
		".a.yaml.mcpkeep-tmp123", "d/.x.mcpkeep-tmp9", "d/.GIT/x"} {
		_, err := s.Stage("bad", []gitstore.Change{put(p, "x")})
		assert.ErrorIs(t, err, gitstore.ErrBadPath, "%q", p)
	}
	_, err = s.Stage("twice", []gitstore.Change{put("a.yaml", "1"), put("a.yaml", "2")})
	assert.ErrorIs(t, err, gitstore.ErrBadPath)
	require.NoError(t, s.Apply())
	hist, err := s.History("", 0)
	require.NoError(t, err)
	assert.Len(t, hist, 1)
}

// TestApplyFailsBeforeBarrierOne: an error before the first barrier
// returns leaves the files, HEAD and the journal as they were, and drops
// every commit staged, those staged on top too.
func TestApplyFailsBeforeBarrierOne(t *testing.T) {
	t.Cleanup(func() { failpoint.Set("") })
	for _, fp := range []string{"gitstore.before-intent=error", "atomicfile.before-fsync=error", "atomicfile.before-write=error"} {
		t.Run(fp, func(t *testing.T) {
			s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n"})
			before, err := s.Head()
			require.NoError(t, err)
			require.NoError(t, failpoint.Set(fp))
			c1 := stage(t, s, "one", put("a.yaml", "a: 1\n"), put("n.yaml", "n\n"))
			c2 := stage(t, s, "two", put("a.yaml", "a: 2\n"))
			err = s.Apply()
			require.ErrorIs(t, err, syscall.EIO)
			for _, c := range []*gitstore.Staged{c1, c2} {
				done, cerr := c.Result()
				assert.True(t, done)
				assert.ErrorIs(t, cerr, syscall.EIO)
			}
			head, err := s.Head()
			require.NoError(t, err)
			assert.Equal(t, before, head)
			assert.Equal(t, "a: 0\n", read(t, dir, "a.yaml"))
			assert.Equal(t, "<none>", read(t, dir, "n.yaml"))
			for _, j := range []string{"mcpkeep-journal-0", "mcpkeep-journal-1"} {
				fi, err := os.Stat(filepath.Join(dir, ".git", j))
				require.NoError(t, err)
				assert.Zero(t, fi.Size(), "%s cut back", j)
			}
			require.NoError(t, failpoint.Set(""))
			c := stage(t, s, "after", put("a.yaml", "a: after\n"))
			require.NoError(t, s.Apply())
			hist, err := s.History("", 0)
			require.NoError(t, err)
			assert.Equal(t, c.Hash(), hist[0].Hash)
			assert.Equal(t, before, hist[1].Hash, "built on HEAD, not on the dropped commits")
		})
	}
}

// TestApplyUnfinished: an error after the first barrier leaves the
// commits durable: HEAD names them, the error says so, and the next
// Apply, or the next Open, puts the files in place.
func TestApplyUnfinished(t *testing.T) {
	for _, next := range []string{"apply", "open"} {
		t.Run(next, func(t *testing.T) {
			s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n", "b.yaml": "b: 0\n"})
			t.Cleanup(func() { failpoint.Set("") })
			require.NoError(t, failpoint.Set("atomicfile.before-rename=error@2"))
			c := stage(t, s, "ab", put("a.yaml", "a: 1\n"), put("b.yaml", "b: 1\n"))
			err := s.Apply()
			var ue *gitstore.UnfinishedError
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, c.Hash(), ue.Commit)
			_, cerr := c.Result()
			require.ErrorAs(t, cerr, &ue)
			head, err := s.Head()
			require.NoError(t, err)
			assert.Equal(t, c.Hash(), head)
			assert.Equal(t, "a: 1\n", read(t, dir, "a.yaml"))
			assert.Equal(t, "b: 0\n", read(t, dir, "b.yaml"), "the second rename failed")
			require.NoError(t, failpoint.Set(""))
			if next == "apply" {
				require.NoError(t, s.Apply())
			} else {
				require.NoError(t, s.Close()) // its flush finishes it too; kill the process instead:
				s = reopenAfterKill(t, dir, c.Hash())
				defer s.Close()
			}
			assert.Equal(t, "b: 1\n", read(t, dir, "b.yaml"))
			head, err = s.Head()
			require.NoError(t, err)
			assert.Equal(t, c.Hash(), head)
		})
	}
}

// reopenAfterKill opens dir again, as a start does, and checks HEAD.
func reopenAfterKill(t *testing.T, dir, head string) *gitstore.Store {
	t.Helper()
	s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	h, err := s.Head()
	require.NoError(t, err)
	assert.Equal(t, head, h)
	return s
}

// TestApplyBarriers: one Apply of a one-file change is two barriers: the
// journal and the temporary file, then the directory. A batch of many
// commits is two barriers too. Counted through internal/barrier, which
// every fsync of the module goes through.
func TestApplyBarriers(t *testing.T) {
	s, _ := initWith(t, map[string]string{"a.yaml": "a: 0\n", "d/b.yaml": "b: 0\n"})
	var c barrier.Counter
	defer barrier.SetCounter(barrier.SetCounter(&c))
	const n = 20
	for i := range n {
		stage(t, s, fmt.Sprint(i), put("a.yaml", fmt.Sprintf("a: %d\n", i+1)))
		require.NoError(t, s.Apply())
	}
	assert.Equal(t, int64(2*n), c.Barriers(), "two barriers an Apply")
	assert.Equal(t, int64(3*n), c.Fsyncs(), "journal and temporary file; directory")

	barrier.SetCounter(&barrier.Counter{})
	var batch barrier.Counter
	barrier.SetCounter(&batch)
	for i := range n {
		stage(t, s, fmt.Sprint("batch", i), put("a.yaml", fmt.Sprintf("a: b%d\n", i)), put("d/b.yaml", fmt.Sprintf("b: %d\n", i)))
	}
	require.NoError(t, s.Apply())
	assert.Equal(t, int64(2), batch.Barriers(), "a batch of %d commits shares the barriers", n)
	assert.Equal(t, int64(3+2), batch.Fsyncs(), "journal and two temporary files; two directories")
}

// TestReadOnlySeesTheJournal: before a flush, the git CLI sees the last
// flushed commit, and a ReadOnly store in another process (here, another
// Store) sees what Apply made durable, reading the journal.
func TestReadOnlySeesTheJournal(t *testing.T) {
	s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n"})
	flushed := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
	c := stage(t, s, "one", put("a.yaml", "a: 1\n"))
	require.NoError(t, s.Apply())
	assert.Equal(t, flushed, strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")), "not flushed yet")

	ro, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	assert.Empty(t, ro.Repairs(), "a journal is not a repair")
	head, err := ro.Head()
	require.NoError(t, err)
	assert.Equal(t, c.Hash(), head)
	b, err := ro.ReadAt("HEAD", "a.yaml")
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", string(b))
	dirty, err := ro.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty)

	require.NoError(t, s.Flush())
	assert.Equal(t, c.Hash(), strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")))
}

// TestMaintainFlushes: Maintain writes the journal to the repository
// after a quiet spell, off the change path, and returns when its context
// is done.
func TestMaintainFlushes(t *testing.T) {
	s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Maintain(ctx) }()
	c := stage(t, s, "one", put("a.yaml", "a: 1\n"))
	require.NoError(t, s.Apply())
	require.Eventually(t, func() bool {
		return strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")) == c.Hash()
	}, 10*time.Second, 5*time.Millisecond, "Maintain flushes")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Maintain did not return when its context was done")
	}
	git(t, dir, "fsck", "--full", "--strict")
	assert.Empty(t, git(t, dir, "status", "--porcelain"))
}

// TestOpenIgnoresATornRecord: a record cut short by a power cut (its
// checksum fails) is not rolled forward, and what came before it is.
func TestOpenIgnoresATornRecord(t *testing.T) {
	s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n"})
	c := stage(t, s, "one", put("a.yaml", "a: 1\n"))
	require.NoError(t, s.Apply())
	journal := filepath.Join(dir, ".git", "mcpkeep-journal-0")
	whole, err := os.ReadFile(journal)
	require.NoError(t, err)
	stage(t, s, "two", put("a.yaml", "a: 2\n"), put("b.yaml", "b\n"))
	require.NoError(t, s.Apply())
	both, err := os.ReadFile(journal)
	require.NoError(t, err)
	// Stop the store without its Close (which would flush): a crash.
	// Then leave the second record torn, its file as after a power cut,
	// with its files not in place.
	torn := append([]byte(nil), both[:len(whole)+(len(both)-len(whole))/2]...)
	s2 := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.CopyFS(s2, os.DirFS(dir)))
	require.NoError(t, os.WriteFile(filepath.Join(s2, ".git", "mcpkeep-journal-0"), torn, 0o600))
	write(t, s2, "a.yaml", "a: 1\n")
	require.NoError(t, os.Remove(filepath.Join(s2, "b.yaml")))

	o, err := gitstore.Open(s2, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	head, err := o.Head()
	require.NoError(t, err)
	assert.Equal(t, c.Hash(), head, "the whole record, not the torn one")
	require.NoError(t, o.Close())
	assert.Equal(t, "a: 1\n", read(t, s2, "a.yaml"))
	assert.Equal(t, c.Hash(), strings.TrimSpace(git(t, s2, "rev-parse", "HEAD")))
	git(t, s2, "fsck", "--full", "--strict")
	assert.Empty(t, git(t, s2, "status", "--porcelain"))
}

// TestMaintainPacksWhenQuiet: the small packs the flushes leave are merged
// by Maintain once changes stop for a while, not while they come.
func TestMaintainPacksWhenQuiet(t *testing.T) {
	defer gitstore.SetPackIdle(50 * time.Millisecond)()
	dir := t.TempDir()
	write(t, dir, "a.yaml", "a: 0\n")
	s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: 20})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Commit("init")
	require.NoError(t, err)
	for i := range 12 {
		stage(t, s, fmt.Sprint(i), put("a.yaml", fmt.Sprintf("a: %d\n", i+1)), put(fmt.Sprintf("n%d.yaml", i), "n\n"))
		require.NoError(t, s.Apply())
		require.NoError(t, s.Flush()) // one small pack each
	}
	packs := func() int {
		m, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.pack"))
		require.NoError(t, err)
		return len(m)
	}
	before := packs()
	require.GreaterOrEqual(t, before, 12)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Maintain(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	stage(t, s, "last", put("a.yaml", "a: last\n"))
	require.NoError(t, s.Apply())
	require.Eventually(t, func() bool { return packs() < before/2 }, 30*time.Second, 5*time.Millisecond, "merged once quiet")
	cancel()
	<-done
	git(t, dir, "fsck", "--full", "--strict")
	hist, err := s.History("", 0)
	require.NoError(t, err)
	assert.Len(t, hist, 14)
}

// TestOpenRollsForwardTheLastTwo: a batch's first barrier may overlap the
// one before's second, so a crash can leave the last two records durable
// and their files at any mix of before, between and after: Open puts the
// last version in place, and leaves a file changed by hand.
func TestOpenRollsForwardTheLastTwo(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string // what the crash left
		c    string // a file no record names
	}{
		{"none renamed", "a: 0\n", "b: 0\n", "c: 0\n"},
		{"first renamed", "a: 1\n", "b: 1\n", "c: 0\n"},
		{"a hand edit", "a: by hand\n", "b: 0\n", "c: 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := initWith(t, map[string]string{"a.yaml": "a: 0\n", "b.yaml": "b: 0\n", "c.yaml": "c: 0\n"})
			stage(t, s, "one", put("a.yaml", "a: 1\n"), put("b.yaml", "b: 1\n"))
			require.NoError(t, s.Apply())
			two := stage(t, s, "two", put("a.yaml", "a: 2\n"))
			require.NoError(t, s.Apply())
			crashed := filepath.Join(t.TempDir(), "crashed")
			require.NoError(t, os.CopyFS(crashed, os.DirFS(dir)))
			write(t, crashed, "a.yaml", tc.a)
			write(t, crashed, "b.yaml", tc.b)

			o, err := gitstore.Open(crashed, &gitstore.Options{HoldsLock: true})
			require.NoError(t, err)
			defer o.Close()
			head, err := o.Head()
			require.NoError(t, err)
			assert.Equal(t, two.Hash(), head)
			wantA := "a: 2\n"
			if tc.a == "a: by hand\n" {
				wantA = tc.a
			}
			assert.Equal(t, wantA, read(t, crashed, "a.yaml"))
			assert.Equal(t, "b: 1\n", read(t, crashed, "b.yaml"))
			assert.Equal(t, "c: 0\n", read(t, crashed, "c.yaml"))
		})
	}
}
