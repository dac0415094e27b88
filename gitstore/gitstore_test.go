package gitstore_test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

func write(t testing.TB, dir, rel, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
}

func TestRandomCommitsMatchGitCLI(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: 300})
	require.NoError(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	commits := 0
	for i := range 500 {
		switch name := fmt.Sprintf("d%d/f%d.yaml", rng.IntN(3), rng.IntN(12)); rng.IntN(4) {
		case 0:
			os.Remove(filepath.Join(dir, filepath.FromSlash(name)))
		default:
			write(t, dir, name, fmt.Sprintf("v: %d\n", rng.IntN(5)))
		}
		h, err := s.Commit(fmt.Sprintf("change %d", i))
		require.NoError(t, err)
		if h != "" {
			commits++
		}
	}
	require.Positive(t, commits)
	assert.Equal(t, strconv.Itoa(commits), strings.TrimSpace(git(t, dir, "rev-list", "--count", "HEAD")))
	git(t, dir, "fsck", "--full", "--strict")
	assert.Empty(t, git(t, dir, "status", "--porcelain"), "the git CLI sees a clean work tree")
	dirty, err := s.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty)
	head, err := s.Head()
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")), head)
	hist, err := s.History("", 0)
	require.NoError(t, err)
	assert.Len(t, hist, commits)
}

func TestEmptyCommitAndDirty(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	h, err := s.Commit("nothing")
	require.NoError(t, err)
	assert.Empty(t, h, "an empty tree is not committed")
	head, err := s.Head()
	require.NoError(t, err)
	assert.Empty(t, head)

	write(t, dir, "a.yaml", "a: 1\n")
	dirty, err := s.Dirty()
	require.NoError(t, err)
	assert.True(t, dirty)
	h, err = s.Commit("first")
	require.NoError(t, err)
	assert.Len(t, h, 40)
	h2, err := s.Commit("again")
	require.NoError(t, err)
	assert.Empty(t, h2, "no change, no commit")
}

func TestRestoreAndRollbackRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	v1 := "name: a\nbytes: \"\\x00é\"\n"
	write(t, dir, "p/a.yaml", v1)
	write(t, dir, "keep.yaml", "k: 1\n")
	bin := make([]byte, 0, 512) // every byte value, NUL and CR included
	for i := range 512 {
		bin = append(bin, byte(i*7))
	}
	write(t, dir, "p/blob.bin", string(bin))
	first, err := s.Commit("one")
	require.NoError(t, err)
	write(t, dir, "p/a.yaml", "name: b\n")
	write(t, dir, "p/blob.bin", "\r\n")
	write(t, dir, "new.yaml", "n: 1\n")
	require.NoError(t, os.Remove(filepath.Join(dir, "keep.yaml")))
	second, err := s.Commit("two")
	require.NoError(t, err)

	require.NoError(t, s.Restore("p/a.yaml", first))
	b, err := os.ReadFile(filepath.Join(dir, "p", "a.yaml"))
	require.NoError(t, err)
	assert.Equal(t, v1, string(b))
	require.NoError(t, s.Restore("p/blob.bin", first))
	b, err = os.ReadFile(filepath.Join(dir, "p", "blob.bin"))
	require.NoError(t, err)
	assert.Equal(t, bin, b)
	write(t, dir, "p/blob.bin", "\r\n") // back to the second version, for Rollback
	head, _ := s.Head()
	assert.Equal(t, second, head, "Restore does not move HEAD")

	rb, err := s.Rollback(first[:8], "rollback to one")
	require.NoError(t, err)
	assert.NotEmpty(t, rb)
	for rel, want := range map[string]string{"p/a.yaml": v1, "keep.yaml": "k: 1\n", "p/blob.bin": string(bin)} {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), rel)
	}
	_, err = os.Stat(filepath.Join(dir, "new.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, "3", strings.TrimSpace(git(t, dir, "rev-list", "--count", "HEAD")), "history is never rewritten")
	assert.Equal(t, strings.TrimSpace(git(t, dir, "rev-parse", first+"^{tree}")), strings.TrimSpace(git(t, dir, "rev-parse", "HEAD^{tree}")))
	again, err := s.Rollback(first, "again")
	require.NoError(t, err)
	assert.Empty(t, again, "already equal")
	git(t, dir, "fsck", "--full", "--strict")
	assert.Empty(t, git(t, dir, "status", "--porcelain"))
}

func TestRevisions(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	write(t, dir, "a.yaml", "a: 1\n")
	first, err := s.Commit("one")
	require.NoError(t, err)

	// go-git answers a bare io.EOF; the error must say what is wrong.
	_, err = s.ReadAt("HEAD~1", "a.yaml")
	var re *gitstore.RevisionError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, gitstore.ErrBadRevision)
	assert.NotErrorIs(t, err, io.EOF, "go-git's bare EOF is mapped")
	assert.ErrorContains(t, err, "goes back past the first commit")
	_, err = s.ReadAt("nope", "a.yaml")
	require.ErrorIs(t, err, gitstore.ErrBadRevision)
	_, err = s.ReadAt("HEAD", "missing.yaml")
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = s.ReadAt("HEAD", "../etc/passwd")
	require.Error(t, err)

	require.NoError(t, s.Tag("v1", "first"))
	require.Error(t, s.Tag("v1", "again"), "tags are not moved")
	require.Error(t, s.Tag("bad name", ""))
	write(t, dir, "a.yaml", "a: 2\n")
	_, err = s.Commit("two")
	require.NoError(t, err)
	for _, rev := range []string{"v1", first, first[:7], "HEAD~1"} {
		b, err := s.ReadAt(rev, "a.yaml")
		require.NoError(t, err, rev)
		assert.Equal(t, "a: 1\n", string(b), rev)
	}
	hist, err := s.History("a.yaml", 1)
	require.NoError(t, err)
	require.Len(t, hist, 1)
	assert.Equal(t, "two", hist[0].Message)
	git(t, dir, "fsck", "--full", "--strict")
}

// TestTagsThatLookLikeHashes: a tag named only with hex digits resolves
// to the tag, as git rev-parse resolves it, even when it is also the start
// of a commit's hash; a short hash that is no ref still resolves.
func TestTagsThatLookLikeHashes(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	write(t, dir, "a.yaml", "a: 1\n")
	first, err := s.Commit("one")
	require.NoError(t, err)
	require.NoError(t, s.Tag("2026", "a year"))
	write(t, dir, "a.yaml", "a: 2\n")
	second, err := s.Commit("two")
	require.NoError(t, err)
	// A tag named like the start of the second commit's hash, on a third
	// commit that has the first one's tree.
	third, err := s.Rollback(first, "back to one")
	require.NoError(t, err)
	require.NoError(t, s.Tag(second[:8], "shadows a short hash"))
	assert.Error(t, s.Tag(second, ""), "a tag named by a full hash would never resolve")

	for _, tc := range []struct {
		rev, want, data string
	}{
		{"2026", first, "a: 1\n"},
		{second[:8], third, "a: 1\n"}, // the ref wins, as in git
		{second[:9], second, "a: 2\n"},
		{second, second, "a: 2\n"},
	} {
		t.Run(tc.rev, func(t *testing.T) {
			assert.Equal(t, tc.want, strings.TrimSpace(git(t, dir, "-c", "core.warnAmbiguousRefs=false", "rev-parse", tc.rev+"^{commit}")), "git rev-parse")
			b, err := s.ReadAt(tc.rev, "a.yaml")
			require.NoError(t, err)
			assert.Equal(t, tc.data, string(b))
			files, err := s.FilesAt(tc.rev)
			require.NoError(t, err)
			assert.Equal(t, []string{"a.yaml"}, files)
		})
	}
	_, err = s.Rollback("2026", "rollback to a tag")
	require.NoError(t, err)
	git(t, dir, "fsck", "--full", "--strict")
}

// TestAuthor: commits (Rollback's too) and tags carry Options.AuthorName
// and AuthorEmail, or mcpkeep's defaults, as author, committer and tagger.
func TestAuthor(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        *gitstore.Options
		wantName    string
		wantAddress string
	}{
		{"defaults", nil, "mcpkeep", "mcpkeep@localhost"},
		{"configured", &gitstore.Options{AuthorName: "Helios Server", AuthorEmail: "helios@example.com"}, "Helios Server", "helios@example.com"},
		{"name only", &gitstore.Options{AuthorName: "helios"}, "helios", "mcpkeep@localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := gitstore.Init(dir, tc.opts)
			require.NoError(t, err)
			defer s.Close()
			write(t, dir, "a.yaml", "a: 1\n")
			first, err := s.Commit("one")
			require.NoError(t, err)
			write(t, dir, "a.yaml", "a: 2\n")
			_, err = s.Commit("two")
			require.NoError(t, err)
			_, err = s.Rollback(first, "back to one")
			require.NoError(t, err)
			require.NoError(t, s.Tag("v1", "tagged"))

			sig := tc.wantName + " <" + tc.wantAddress + ">"
			assert.Equal(t, strings.Repeat(sig+" | "+sig+"\n", 3), git(t, dir, "log", "--format=%an <%ae> | %cn <%ce>"), "author | committer")
			assert.Equal(t, sig+"\n", git(t, dir, "for-each-ref", "--format=%(taggername) %(taggeremail)", "refs/tags/v1"), "tagger")
			hist, err := s.History("", 0)
			require.NoError(t, err)
			require.Len(t, hist, 3)
			for _, c := range hist {
				assert.Equal(t, tc.wantName, c.Author)
			}
		})
	}
}

func TestOpenNotRepo(t *testing.T) {
	_, err := gitstore.Open(t.TempDir(), nil)
	require.ErrorIs(t, err, gitstore.ErrNotRepo)
}

// TestOpenRepairs plants each failure go-git itself leaves after a kill
// (measured: empty and truncated refs, truncated index, tmp_obj_ files,
// stale locks) and checks Open repairs it.
func TestOpenRepairs(t *testing.T) {
	cases := map[string]func(t *testing.T, gitDir string){
		"empty ref": func(t *testing.T, gitDir string) {
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "refs", "heads", "main"), nil, 0o644))
		},
		"garbage ref": func(t *testing.T, gitDir string) {
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "refs", "heads", "main"), []byte("zz\x00garbage"), 0o644))
		},
		"missing ref": func(t *testing.T, gitDir string) {
			require.NoError(t, os.Remove(filepath.Join(gitDir, "refs", "heads", "main")))
		},
		"truncated index": func(t *testing.T, gitDir string) {
			require.NoError(t, os.Truncate(filepath.Join(gitDir, "index"), 7))
		},
		"empty index": func(t *testing.T, gitDir string) {
			require.NoError(t, os.Truncate(filepath.Join(gitDir, "index"), 0))
		},
		"garbage HEAD": func(t *testing.T, gitDir string) {
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "HEAD"), nil, 0o644))
		},
		"corrupt config": func(t *testing.T, gitDir string) {
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "config"), []byte("[core\n"), 0o644))
		},
		"pack index without its pack": func(t *testing.T, gitDir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(gitDir, "objects", "pack"), 0o755))
			idx := filepath.Join(gitDir, "objects", "pack", "pack-"+strings.Repeat("ab", 20)+".idx")
			require.NoError(t, os.WriteFile(idx, []byte("\377tOc"), 0o444))
		},
		"tmp_obj and stale locks": func(t *testing.T, gitDir string) {
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "objects", "tmp_obj_123"), []byte("x"), 0o444))
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "index.lock"), nil, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "refs", "heads", "main.lock"), nil, 0o644))
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := gitstore.Init(dir, nil)
			require.NoError(t, err)
			write(t, dir, "a.yaml", "a: 1\n")
			_, err = s.Commit("one")
			require.NoError(t, err)
			write(t, dir, "a.yaml", "a: 2\n")
			want, err := s.Commit("two")
			require.NoError(t, err)
			s.Close()

			plant(t, filepath.Join(dir, ".git"))
			before := dirHash(t, dir)
			ro, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true, ReadOnly: true})
			require.NoError(t, err)
			require.NotEmpty(t, ro.Repairs())
			for _, r := range ro.Repairs() {
				assert.True(t, strings.HasPrefix(r, "would be "), "read-only repairs are only listed: %q", r)
			}
			head, err := ro.Head()
			require.NoError(t, err)
			assert.Equal(t, want, head, "a read-only store sees the repaired refs")
			_, err = ro.Commit("refused")
			require.ErrorIs(t, err, gitstore.ErrReadOnly)
			require.ErrorIs(t, ro.Restore("a.yaml", "HEAD"), gitstore.ErrReadOnly)
			_, err = ro.Rollback("HEAD", "refused")
			require.ErrorIs(t, err, gitstore.ErrReadOnly)
			require.ErrorIs(t, ro.Tag("refused", ""), gitstore.ErrReadOnly)
			ro.Close()
			assert.Equal(t, before, dirHash(t, dir), "a read-only Open changes nothing")

			s, err = gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
			require.NoError(t, err)
			defer s.Close()
			assert.NotEmpty(t, s.Repairs())
			head, err = s.Head()
			require.NoError(t, err)
			assert.Equal(t, want, head)
			write(t, dir, "a.yaml", "a: 3\n")
			_, err = s.Commit("three")
			require.NoError(t, err)
			git(t, dir, "fsck", "--full", "--strict")
			assert.Empty(t, git(t, dir, "status", "--porcelain"))
			assert.Equal(t, "3", strings.TrimSpace(git(t, dir, "rev-list", "--count", "HEAD")))
		})
	}
}

// TestCorruptConfig: a .git/config that does not parse is set aside, its
// bytes kept, and rewritten by the holder of the home lock; anyone else
// gets an error that names the file and says what to do.
func TestCorruptConfig(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	write(t, dir, "a.yaml", "a: 1\n")
	want, err := s.Commit("one")
	require.NoError(t, err)
	s.Close()
	path := filepath.Join(dir, ".git", "config")
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	bad := []byte("[core]\n\tbare = true\n[remote \"origin\"\n\turl = /elsewhere\n")
	require.NoError(t, os.WriteFile(path, bad, 0o644))

	_, err = gitstore.Open(dir, nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, path+" does not parse")
	assert.ErrorContains(t, err, "holding the home lock", "says what to do")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, bad, b, "left as it was")

	s, err = gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	defer s.Close()
	require.Len(t, s.Repairs(), 1)
	assert.Contains(t, s.Repairs()[0], "rewrote .git/config")
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, good, b, "the config Init writes")
	saved, err := filepath.Glob(path + ".corrupt-*")
	require.NoError(t, err)
	require.Len(t, saved, 1)
	assert.Contains(t, s.Repairs()[0], filepath.Base(saved[0]), "the repair names the copy")
	b, err = os.ReadFile(saved[0])
	require.NoError(t, err)
	assert.Equal(t, bad, b, "the bad config's bytes are kept")
	head, err := s.Head()
	require.NoError(t, err)
	assert.Equal(t, want, head)
	git(t, dir, "fsck", "--full", "--strict")
}

// TestOpenRemovesAtomicTemps: a kill inside an atomic write of a ref, the
// stamp or the index leaves its temporary file in .git (found by the crash
// suite); Open removes it, and a read-only Open only lists it.
func TestOpenRemovesAtomicTemps(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	write(t, dir, "a.yaml", "a: 1\n")
	_, err = s.Commit("one")
	require.NoError(t, err)
	s.Close()
	gitDir := filepath.Join(dir, ".git")
	temps := []string{
		filepath.Join(gitDir, ".index.mcpkeep-tmp375928317861124411"),
		filepath.Join(gitDir, ".mcpkeep-head.mcpkeep-tmp5121365338946438141"),
		filepath.Join(gitDir, "refs", "heads", ".main.mcpkeep-tmp8674665223082153551"),
	}
	for _, p := range temps {
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
	}

	ro, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	assert.Len(t, ro.Repairs(), len(temps))
	ro.Close()
	for _, p := range temps {
		assert.FileExists(t, p, "a read-only Open removes nothing")
	}

	s, err = gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	defer s.Close()
	assert.Len(t, s.Repairs(), len(temps))
	for _, p := range temps {
		assert.NoFileExists(t, p)
	}
}

// TestInitFinishesAnInitKilledBeforeItsConfig: go-git's Init writes HEAD
// before the config; a kill between the two left a .git that go-git would
// not init again and Open did not accept, so the home never started again
// (found by the crash suite's random kills during bootstrap).
func TestInitFinishesAnInitKilledBeforeItsConfig(t *testing.T) {
	want := t.TempDir()
	s, err := gitstore.Init(want, nil)
	require.NoError(t, err)
	s.Close()

	dir := t.TempDir()
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git", d), 0o700))
	}
	write(t, dir, ".git/HEAD", "ref: refs/heads/master\n")
	s, err = gitstore.Init(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	config, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	require.NoError(t, err)
	wantConfig, err := os.ReadFile(filepath.Join(want, ".git", "config"))
	require.NoError(t, err)
	assert.Equal(t, string(wantConfig), string(config), "the config go-git would have written")
	write(t, dir, "a.yaml", "a: 1\n")
	_, err = s.Commit("one")
	require.NoError(t, err)
	git(t, dir, "fsck", "--full", "--strict")
	assert.Equal(t, "main", strings.TrimSpace(git(t, dir, "branch", "--show-current")))
}

// TestLocksKeptWithoutHoldsLock: without the home lock, a *.lock or a
// temporary file may be a live writer's; Open leaves both alone.
func TestLocksKeptWithoutHoldsLock(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	s.Close()
	lock := filepath.Join(dir, ".git", "index.lock")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	temp := filepath.Join(dir, ".git", ".index.mcpkeep-tmp375928317861124411")
	require.NoError(t, os.WriteFile(temp, []byte("partial"), 0o644))
	s, err = gitstore.Open(dir, nil)
	require.NoError(t, err)
	assert.Empty(t, s.Repairs())
	s.Close()
	assert.FileExists(t, lock, "without the home lock a *.lock may be a live writer's")
	assert.FileExists(t, temp, "without the home lock a temporary file may be a live write's")
}

// dirHash hashes the names, kinds and bytes of everything under dir.
func dirHash(t *testing.T, dir string) string {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", p, d.Type())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	require.NoError(t, err)
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestFilesAt(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	write(t, dir, "a.yaml", "a: 1\n")
	write(t, dir, "personas/p.yaml", "p: 1\n")
	first, err := s.Commit("one")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "personas", "p.yaml")))
	write(t, dir, "b.yaml", "b: 1\n")
	_, err = s.Commit("two")
	require.NoError(t, err)

	files, err := s.FilesAt(first)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml", "personas/p.yaml"}, files)
	files, err = s.FilesAt("HEAD")
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml", "b.yaml"}, files)
	_, err = s.FilesAt("HEAD~5")
	require.ErrorIs(t, err, gitstore.ErrBadRevision)
}

func TestIsFanOut(t *testing.T) {
	for name, want := range map[string]bool{
		"00": true, "3f": true, "ff": true,
		"3F": false, "g0": false, "0": false, "abc": false, "pack": false, "info": false, "": false,
	} {
		assert.Equal(t, want, gitstore.IsFanOut(name), name)
	}
}

// TestWriteAfterClose: once Close has returned, every method that writes
// refuses with ErrClosed and writes nothing, though the work tree has a
// change to commit; reads go on.
func TestWriteAfterClose(t *testing.T) {
	dir := t.TempDir()
	s, err := gitstore.Init(dir, nil)
	require.NoError(t, err)
	write(t, dir, "a.yaml", "a: 1\n")
	head, err := s.Commit("one")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	write(t, dir, "a.yaml", "a: 2\n")
	before := dirHash(t, dir)
	_, err = s.Commit("two")
	assert.ErrorIs(t, err, gitstore.ErrClosed)
	_, err = s.Stage("two", []gitstore.Change{{Path: "b.yaml", Data: []byte("b: 1\n")}})
	assert.ErrorIs(t, err, gitstore.ErrClosed)
	assert.ErrorIs(t, s.Restore("a.yaml", "HEAD"), gitstore.ErrClosed)
	_, err = s.Rollback("HEAD", "two")
	assert.ErrorIs(t, err, gitstore.ErrClosed)
	assert.ErrorIs(t, s.Tag("two", ""), gitstore.ErrClosed)
	assert.Equal(t, before, dirHash(t, dir), "nothing written")
	got, err := s.Head()
	require.NoError(t, err)
	assert.Equal(t, head, got)
}
