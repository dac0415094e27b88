package gitstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
)

// change stages and applies one commit of files (path → bytes; "" removes).
func change(t testing.TB, s *gitstore.Store, msg string, files map[string]string) string {
	t.Helper()
	var cs []gitstore.Change
	for p, d := range files {
		cs = append(cs, gitstore.Change{Path: p, Data: []byte(d), Remove: d == ""})
	}
	c, err := s.Stage(msg, cs)
	require.NoError(t, err)
	require.NotNil(t, c, "the change changes nothing")
	require.NoError(t, c.Wait())
	return c.Hash()
}

// home makes a store with one first commit of files in a new directory.
func home(t testing.TB, files map[string]string) *gitstore.Store {
	t.Helper()
	s, err := gitstore.Init(t.TempDir(), &gitstore.Options{HoldsLock: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	if files != nil {
		change(t, s, "first", files)
	}
	return s
}

// clone makes a store whose history is the remote's: an empty store that
// fetches it.
func fetchClone(t testing.TB, url string, opts *gitstore.RemoteOptions) (*gitstore.Store, *gitstore.Remote) {
	t.Helper()
	s := home(t, nil)
	r := attach(t, s, url, opts)
	in, err := r.Fetch(t.Context())
	require.NoError(t, err)
	require.Equal(t, gitstore.ActionFastForward, in.Action)
	return s, r
}

func attach(t testing.TB, s *gitstore.Store, url string, opts *gitstore.RemoteOptions) *gitstore.Remote {
	t.Helper()
	o := gitstore.RemoteOptions{Credentials: &gitstore.Credentials{}}
	if opts != nil {
		o = *opts
		if o.Credentials == nil {
			o.Credentials = &gitstore.Credentials{}
		}
	}
	o.URL = url
	r, err := gitstore.NewRemote(s, &o)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

func readWork(t testing.TB, s *gitstore.Store, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir(), filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

func head(t testing.TB, s *gitstore.Store) string {
	t.Helper()
	h, err := s.Head()
	require.NoError(t, err)
	return h
}

// fsck checks a repository with the git CLI, strictly.
func fsck(t testing.TB, dir string) {
	t.Helper()
	gitremote.Run(t, dir, "fsck", "--full", "--strict", "--no-dangling")
}

// remotes are the two kinds of remote every round trip is tried on.
func remotes(t *testing.T) map[string]func(t *testing.T) (url, bare string) {
	return map[string]func(t *testing.T) (string, string){
		"file": func(t *testing.T) (string, string) {
			bare := gitremote.Bare(t)
			return gitremote.FileURL(bare), bare
		},
		"http": func(t *testing.T) (string, string) {
			bare := gitremote.Bare(t)
			return gitremote.Serve(t, bare, nil).URL(), bare
		},
	}
}

func TestRemoteRoundTrip(t *testing.T) {
	for name, start := range remotes(t) {
		t.Run(name, func(t *testing.T) {
			url, bare := start(t)
			a := home(t, map[string]string{"personas/default.yaml": "name: default\n"})
			ra := attach(t, a, url, nil)
			rep, err := ra.Sync(t.Context())
			require.NoError(t, err)
			assert.True(t, rep.Pushed)
			assert.Equal(t, gitstore.ActionNone, rep.Fetch.Action, "an empty remote has nothing to fetch")
			assert.Equal(t, head(t, a), strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))
			fsck(t, bare)

			// A second home takes the remote's history whole.
			b, rb := fetchClone(t, url, nil)
			assert.Equal(t, head(t, a), head(t, b))
			assert.Equal(t, "name: default\n", readWork(t, b, "personas/default.yaml"))

			// Changes go both ways.
			change(t, b, "b writes", map[string]string{"personas/b.yaml": "name: b\n"})
			require.NoError(t, rb.Push(t.Context()))
			in, err := ra.Fetch(t.Context())
			require.NoError(t, err)
			assert.Equal(t, gitstore.ActionFastForward, in.Action)
			assert.Equal(t, "name: b\n", readWork(t, a, "personas/b.yaml"))
			change(t, a, "a writes", map[string]string{"personas/default.yaml": "name: changed\n"})
			require.NoError(t, ra.Push(t.Context()))
			_, err = rb.Fetch(t.Context())
			require.NoError(t, err)
			assert.Equal(t, "name: changed\n", readWork(t, b, "personas/default.yaml"))
			assert.Equal(t, head(t, a), head(t, b))

			log := gitremote.Run(t, bare, "log", "--format=%s", "main")
			assert.Equal(t, "a writes\nb writes\nfirst\n", log)
			fsck(t, bare)
			for _, s := range []*gitstore.Store{a, b} {
				require.NoError(t, s.Flush())
				fsck(t, s.Dir())
				assert.Empty(t, gitremote.Run(t, s.Dir(), "status", "--porcelain"), "the CLI sees the files of HEAD")
			}
			st := ra.Status()
			assert.Equal(t, 0, st.Ahead)
			assert.Equal(t, 0, st.Behind)
			assert.Equal(t, head(t, a), st.Remote)
		})
	}
}

func TestRemoteMergeKeepsBothSides(t *testing.T) {
	url, bare := remotes(t)["file"](t)
	a := home(t, map[string]string{"x.yaml": "x: base\n", "a.yaml": "a: base\n", "b.yaml": "b: base\n", "gone.yaml": "g\n"})
	ra := attach(t, a, url, nil)
	require.NoError(t, ra.Push(t.Context()))
	b, rb := fetchClone(t, url, nil)

	// Both change x.yaml; each changes a file of its own.
	change(t, a, "a side", map[string]string{"x.yaml": "x: from a\n", "a.yaml": "a: changed\n", "gone.yaml": ""})
	aHead := head(t, a)
	require.NoError(t, ra.Push(t.Context()))
	change(t, b, "b side", map[string]string{"x.yaml": "x: from b\n", "b.yaml": "b: changed\n", "new/b.yaml": "nb\n"})
	bHead := head(t, b)
	err := rb.Push(t.Context())
	require.ErrorIs(t, err, gitstore.ErrRemoteMoved, "the remote has a's commit: b must merge first")

	in, err := rb.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionMerge, in.Action)
	assert.Equal(t, []string{"x.yaml"}, in.Conflicts)
	assert.ElementsMatch(t, []string{"a.yaml", "gone.yaml"}, in.Taken)
	require.NotEmpty(t, in.Tag)
	assert.True(t, strings.HasPrefix(in.Tag, gitstore.ConflictTagPrefix))
	tag := in.Tag

	// The tree: ours for x, theirs for a, ours for b, a's removal taken.
	assert.Equal(t, "x: from b\n", readWork(t, b, "x.yaml"))
	assert.Equal(t, "a: changed\n", readWork(t, b, "a.yaml"))
	assert.Equal(t, "b: changed\n", readWork(t, b, "b.yaml"))
	assert.Equal(t, "nb\n", readWork(t, b, "new/b.yaml"))
	assert.Empty(t, readWork(t, b, "gone.yaml"))
	// The merge commit: parents ours then theirs; the tag on theirs.
	require.NoError(t, b.Flush())
	parents := strings.Fields(gitremote.Run(t, b.Dir(), "log", "-1", "--format=%P"))
	assert.Equal(t, []string{bHead, aHead}, parents)
	assert.Equal(t, "x: from a\n", gitremote.Run(t, b.Dir(), "show", in.Tag+":x.yaml"))
	assert.Contains(t, gitremote.Run(t, b.Dir(), "log", "-1", "--format=%B"), "Conflict: x.yaml")
	conflicts, err := b.Conflicts()
	require.NoError(t, err)
	require.Len(t, conflicts, 1)
	assert.Equal(t, in.Tag, conflicts[0].Tag)
	assert.Equal(t, []string{"x.yaml"}, conflicts[0].Files)
	assert.Equal(t, aHead, conflicts[0].Remote)
	assert.Equal(t, gitstore.KeptHome, conflicts[0].Kept, "async mode keeps this home's version")
	assert.Equal(t, gitstore.KeptHome, in.Kept)
	hist, err := b.History("x.yaml", 0)
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	assert.Equal(t, in.Commit, hist[0].Hash, "the history of x.yaml names the merge that kept it")
	assert.Equal(t, []string{"x.yaml"}, hist[0].Conflicts)
	assert.Equal(t, in.Tag, hist[0].ConflictTag)

	// b pushes the merge; a fast-forwards to it: the same tree on both.
	require.NoError(t, rb.Push(t.Context()))
	in, err = ra.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionFastForward, in.Action)
	assert.Equal(t, head(t, b), head(t, a))
	for _, f := range []string{"x.yaml", "a.yaml", "b.yaml", "new/b.yaml", "gone.yaml"} {
		assert.Equal(t, readWork(t, b, f), readWork(t, a, f), f)
	}
	fsck(t, bare)
	require.NoError(t, a.Flush())
	fsck(t, a.Dir())
	fsck(t, b.Dir())

	require.NoError(t, b.ResolveConflict(tag))
	conflicts, err = b.Conflicts()
	require.NoError(t, err)
	assert.Empty(t, conflicts)
}

// TestRemoteSyncModeMergeTakesTheRemote: in sync mode the remote holds
// every acknowledged change, so a home installed on its own (a history
// unrelated to the remote's) that merges the remote takes the remote's
// version of a file both changed, and tags its own.
func TestRemoteSyncModeMergeTakesTheRemote(t *testing.T) {
	url, bare := remotes(t)["file"](t)
	a := home(t, map[string]string{"x.yaml": "x: base\n", "same.yaml": "s\n"})
	ra := attach(t, a, url, &gitstore.RemoteOptions{Mode: gitstore.RemoteSync})
	require.NoError(t, ra.Push(t.Context()))
	aHead := change(t, a, "a acknowledged", map[string]string{"x.yaml": "x: from a\n"})
	require.Equal(t, aHead, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))

	b := home(t, map[string]string{"x.yaml": "x: base\n", "same.yaml": "s\n", "b.yaml": "b\n"})
	bHead := change(t, b, "b's own", map[string]string{"x.yaml": "x: from b\n"})
	rb := attach(t, b, url, &gitstore.RemoteOptions{Mode: gitstore.RemoteSync})
	in, err := rb.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionMerge, in.Action)
	assert.Equal(t, []string{"x.yaml"}, in.Conflicts)
	assert.Equal(t, gitstore.KeptRemote, in.Kept)
	require.NotEmpty(t, in.Tag)

	assert.Equal(t, "x: from a\n", readWork(t, b, "x.yaml"), "the acknowledged version")
	assert.Equal(t, "b\n", readWork(t, b, "b.yaml"))
	require.NoError(t, b.Flush())
	assert.Equal(t, []string{bHead, aHead}, strings.Fields(gitremote.Run(t, b.Dir(), "log", "-1", "--format=%P")))
	assert.Equal(t, "x: from b\n", gitremote.Run(t, b.Dir(), "show", in.Tag+":x.yaml"), "the tag holds this home's version")
	assert.Equal(t, bHead, strings.TrimSpace(gitremote.Run(t, b.Dir(), "rev-parse", in.Tag+"^{commit}")))
	msg := gitremote.Run(t, b.Dir(), "log", "-1", "--format=%B")
	assert.Contains(t, msg, "took the remote's version of 1 file(s)")
	assert.Contains(t, msg, "Kept: remote")
	assert.Contains(t, msg, "Conflict: x.yaml")
	conflicts, err := b.Conflicts()
	require.NoError(t, err)
	require.Len(t, conflicts, 1)
	assert.Equal(t, gitstore.Conflict{Tag: in.Tag, When: conflicts[0].When, Remote: aHead, Kept: gitstore.KeptRemote,
		Files: []string{"x.yaml"}}, conflicts[0])

	require.NoError(t, rb.Push(t.Context()))
	assert.Equal(t, head(t, b), strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))
	fsck(t, bare)
	fsck(t, b.Dir())
}

func TestRemoteRefusesLinksAndLargeFiles(t *testing.T) {
	url, bare := remotes(t)["file"](t)
	a := home(t, map[string]string{"keep.yaml": "k\n"})
	ra := attach(t, a, url, nil)
	require.NoError(t, ra.Push(t.Context()))

	// Someone pushes a link, a large file and a good file with the CLI.
	work := t.TempDir()
	gitremote.Run(t, work, "clone", "-q", url, ".")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(work, "evil.yaml")))
	require.NoError(t, os.WriteFile(filepath.Join(work, "big.yaml"), []byte(strings.Repeat("x", 2<<20)), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(work, "good.yaml"), []byte("g\n"), 0o600))
	gitremote.Run(t, work, "add", "-A")
	gitremote.Run(t, work, "commit", "-q", "-m", "hostile")
	gitremote.Run(t, work, "push", "-q", "origin", "HEAD:main")

	in, err := ra.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionMerge, in.Action, "a tree this store cannot take whole is merged, not fast-forwarded")
	assert.Equal(t, []string{"good.yaml"}, in.Taken)
	require.Len(t, in.Refused, 2)
	assert.Contains(t, in.Refused[0], "big.yaml")
	assert.Contains(t, in.Refused[1], "evil.yaml (a symbolic link)")
	assert.NotEmpty(t, in.Tag)
	_, err = os.Lstat(filepath.Join(a.Dir(), "evil.yaml"))
	assert.True(t, os.IsNotExist(err), "no link in the work tree")
	_, err = os.Lstat(filepath.Join(a.Dir(), "big.yaml"))
	assert.True(t, os.IsNotExist(err))
	assert.Equal(t, "g\n", readWork(t, a, "good.yaml"))
	require.NoError(t, a.Flush())
	assert.NotContains(t, gitremote.Run(t, a.Dir(), "ls-files", "-s"), "120000", "no link in HEAD's tree")
	require.NoError(t, ra.Push(t.Context()))
	assert.NotContains(t, gitremote.Run(t, bare, "ls-tree", "-r", "main"), "evil.yaml", "the merge pushed drops the link")
	fsck(t, bare)
}

func TestRemoteSyncModeFailsCleanlyWhenDown(t *testing.T) {
	bare := gitremote.Bare(t)
	srv := gitremote.Serve(t, bare, nil)
	a := home(t, map[string]string{"x.yaml": "x: 1\n"})
	ra := attach(t, a, srv.URL(), &gitstore.RemoteOptions{Mode: gitstore.RemoteSync, Timeout: 5 * time.Second})
	_, err := ra.Sync(t.Context())
	require.NoError(t, err)

	// Acknowledged only once the remote has it.
	h := change(t, a, "second", map[string]string{"x.yaml": "x: 2\n"})
	assert.Equal(t, h, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))

	srv.Stop()
	before := head(t, a)
	c, err := a.Stage("third", []gitstore.Change{{Path: "x.yaml", Data: []byte("x: 3\n")}, {Path: "y.yaml", Data: []byte("y\n")}})
	require.NoError(t, err)
	err = c.Wait()
	require.ErrorIs(t, err, gitstore.ErrRemote)
	assert.NotErrorIs(t, err, gitstore.ErrRemoteMoved)
	assert.Contains(t, err.Error(), "not made, here or on the remote")
	assert.Equal(t, before, head(t, a), "nothing half-applied: HEAD unchanged")
	assert.Equal(t, "x: 2\n", readWork(t, a, "x.yaml"))
	assert.Empty(t, readWork(t, a, "y.yaml"))
	assert.Equal(t, h, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))

	srv.Start()
	h = change(t, a, "fourth", map[string]string{"x.yaml": "x: 4\n"})
	assert.Equal(t, h, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))
	require.NoError(t, a.Flush())
	assert.Equal(t, "fourth\nsecond\nfirst\n", gitremote.Run(t, a.Dir(), "log", "--format=%s"))
	fsck(t, bare)
	fsck(t, a.Dir())
}

func TestRemoteSyncModeRefusesWhenMoved(t *testing.T) {
	url, bare := remotes(t)["file"](t)
	a := home(t, map[string]string{"x.yaml": "x: 1\n"})
	ra := attach(t, a, url, &gitstore.RemoteOptions{Mode: gitstore.RemoteSync})
	_, err := ra.Sync(t.Context())
	require.NoError(t, err)
	b, rb := fetchClone(t, url, nil)
	change(t, b, "b moves the remote", map[string]string{"y.yaml": "y\n"})
	require.NoError(t, rb.Push(t.Context()))
	moved := strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main"))

	before := head(t, a)
	c, err := a.Stage("a writes", []gitstore.Change{{Path: "x.yaml", Data: []byte("x: 2\n")}})
	require.NoError(t, err)
	err = c.Wait()
	require.ErrorIs(t, err, gitstore.ErrRemoteMoved)
	assert.Contains(t, err.Error(), "another writer moved the remote")
	assert.Equal(t, before, head(t, a))
	assert.Equal(t, moved, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")), "never forced")

	in, err := ra.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionFastForward, in.Action)
	h := change(t, a, "a writes again", map[string]string{"x.yaml": "x: 2\n"})
	assert.Equal(t, h, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))
	fsck(t, bare)
}

func TestRemoteHTTPCredentialsNeverShown(t *testing.T) {
	bare := gitremote.Bare(t)
	srv := gitremote.Serve(t, bare, &gitremote.Options{User: "alice", Password: "s3cret-pw"})
	a := home(t, map[string]string{"x.yaml": "x\n"})

	// Wrong password, given in the URL: the error never shows it.
	r := attach(t, a, srv.URLWithPassword("alice", "wr0ng-pw"), nil)
	err := r.Push(t.Context())
	require.ErrorIs(t, err, gitstore.ErrRemote)
	assert.NotContains(t, err.Error(), "wr0ng-pw")
	assert.Contains(t, err.Error(), "xxxxx")
	assert.NotContains(t, r.Status().Error, "wr0ng-pw")
	assert.NotContains(t, r.Status().URL, "wr0ng-pw")
	require.NoError(t, r.Close())

	// The right one, from Credentials (the environment's, in a server).
	r = attach(t, a, srv.URL(), &gitstore.RemoteOptions{Credentials: &gitstore.Credentials{Username: "alice", Password: "s3cret-pw"}})
	require.NoError(t, r.Push(t.Context()))
	assert.Equal(t, head(t, a), strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))
	// Nothing of them in the repository.
	require.NoError(t, a.Flush())
	out, _ := gitremote.Output(t, a.Dir(), "grep", "--no-index", "-r", "-l", "s3cret-pw", ".")
	assert.Empty(t, strings.TrimSpace(out), "no file of the home holds the password")
}

func TestRemoteRunPushesInTheBackground(t *testing.T) {
	url, bare := remotes(t)["http"](t)
	a := home(t, map[string]string{"x.yaml": "x: 0\n"})
	var statuses []gitstore.RemoteStatus
	statusCh := make(chan gitstore.RemoteStatus, 100)
	ra := attach(t, a, url, &gitstore.RemoteOptions{OnStatus: func(st gitstore.RemoteStatus) {
		select {
		case statusCh <- st:
		default:
		}
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- ra.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	var last string
	for i := 1; i <= 5; i++ {
		last = change(t, a, "change", map[string]string{"x.yaml": "x: " + string(rune('0'+i)) + "\n"})
	}
	deadline := time.After(30 * time.Second)
	for {
		var st gitstore.RemoteStatus
		select {
		case st = <-statusCh:
		case <-deadline:
			t.Fatalf("the remote never got %s; statuses: %+v", last, statuses)
		}
		statuses = append(statuses, st)
		if st.Remote == last && st.Ahead == 0 {
			break
		}
	}
	assert.Equal(t, last, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))
}

// TestRemoteMayPushFetchesOnly: a store that is not the writer
// (RemoteOptions.MayPush says no) never moves the remote's branch: Run
// fetches and pushes nothing, Push says ErrNotWriter, a diverged history
// is left unmerged, a sync-mode change fails made nowhere. Once it is the
// writer, it merges and pushes.
func TestRemoteMayPushFetchesOnly(t *testing.T) {
	url, bare := remotes(t)["file"](t)
	w := home(t, map[string]string{"w.yaml": "w: 1\n"})
	rw := attach(t, w, url, nil)
	require.NoError(t, rw.Push(t.Context()))
	writerTip := head(t, w)

	// A standby installed on its own: its history is not the remote's.
	var writer atomic.Bool
	s := home(t, map[string]string{"s.yaml": "s: 1\n"})
	own := head(t, s)
	statuses := make(chan gitstore.RemoteStatus, 100)
	rs := attach(t, s, url, &gitstore.RemoteOptions{Mode: gitstore.RemoteSync, Interval: 20 * time.Millisecond,
		MayPush: writer.Load, OnStatus: func(st gitstore.RemoteStatus) {
			select {
			case statuses <- st:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- rs.Run(ctx) }()
	// Run pushes what the remote lacks right after a fetch, before the
	// next one: three fetches mean a writer would have pushed.
	fetches, deadline := 0, time.After(30*time.Second)
	for fetches < 3 {
		select {
		case st := <-statuses:
			if st.Error == "" && st.Ahead > 0 && st.Behind > 0 {
				fetches++
			}
		case <-deadline:
			t.Fatal("the standby's Run never fetched three times")
		}
	}
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, writerTip, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")), "a standby pushed")
	assert.Equal(t, own, head(t, s), "a standby merged")

	in, err := rs.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionDiverged, in.Action)
	require.ErrorIs(t, rs.Push(t.Context()), gitstore.ErrNotWriter)
	c, err := s.Stage("a standby's change", []gitstore.Change{{Path: "s.yaml", Data: []byte("s: 2\n")}})
	require.NoError(t, err)
	require.ErrorIs(t, c.Wait(), gitstore.ErrNotWriter)
	assert.Equal(t, own, head(t, s), "the refused change was made here")
	assert.Equal(t, "s: 1\n", readWork(t, s, "s.yaml"))
	assert.Equal(t, writerTip, strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))

	// Elected: the catch-up merges, and the merge is pushed.
	writer.Store(true)
	in, err = rs.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionMerge, in.Action)
	assert.Equal(t, head(t, s), strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")), "the writer's merge is on the remote")
	assert.Equal(t, "w: 1\n", readWork(t, s, "w.yaml"))
	fsck(t, bare)
	fsck(t, s.Dir())
}

// TestRemoteJoinOwnInstall: two homes installed on their own from the
// same defaults have unrelated histories, and a file one of them changed
// before they first met is not a conflict: the other's version of it is
// the install's, which the changed one's history holds. Whichever side
// merges, the change is kept and no conflicts tag is made for it; a file
// both changed is still a conflict. (TestTwoHostsOneRemoteAsync once saw
// a second tag: b's install reached the remote first, and a, whose
// default.yaml had changed since its own install, merged it.)
func TestRemoteJoinOwnInstall(t *testing.T) {
	install := map[string]string{"x.yaml": "x: base\n", "y.yaml": "y: base\n", "same.yaml": "s\n"}
	for _, changedMerges := range []bool{false, true} {
		t.Run(fmt.Sprintf("changed-side-merges=%v", changedMerges), func(t *testing.T) {
			url, bare := remotes(t)["file"](t)
			// Two installs: the same files, two commits.
			changed, fresh := home(t, nil), home(t, nil)
			change(t, changed, "install changed", install)
			change(t, fresh, "install fresh", install)
			rc, rf := attach(t, changed, url, nil), attach(t, fresh, url, nil)
			// The merger's install reaches the remote first; the other
			// pushes its change on top of its own install.
			merger, rm, other, ro := fresh, rf, changed, rc
			if changedMerges {
				merger, rm, other, ro = changed, rc, fresh, rf
			}
			require.NoError(t, ro.Push(t.Context()))
			change(t, changed, "changed", map[string]string{"x.yaml": "x: changed\n", "both.yaml": "changed\n"})
			change(t, fresh, "fresh", map[string]string{"y.yaml": "y: fresh\n", "both.yaml": "fresh\n"})
			require.NoError(t, ro.Push(t.Context()))

			in, err := rm.Fetch(t.Context())
			require.NoError(t, err)
			assert.Equal(t, gitstore.ActionMerge, in.Action)
			assert.Equal(t, []string{"both.yaml"}, in.Conflicts, "only the file both changed is a conflict")
			assert.Equal(t, "x: changed\n", readWork(t, merger, "x.yaml"), "the change to the install's x.yaml is kept")
			assert.Equal(t, "y: fresh\n", readWork(t, merger, "y.yaml"), "the change to the install's y.yaml is kept")
			assert.Equal(t, "s\n", readWork(t, merger, "same.yaml"))
			conflicts, err := merger.Conflicts()
			require.NoError(t, err)
			require.Len(t, conflicts, 1, "one tag")
			assert.Equal(t, []string{"both.yaml"}, conflicts[0].Files)
			require.NoError(t, rm.Push(t.Context()))
			in, err = ro.Fetch(t.Context())
			require.NoError(t, err)
			assert.Equal(t, gitstore.ActionFastForward, in.Action)
			assert.Equal(t, "x: changed\n", readWork(t, other, "x.yaml"))
			assert.Equal(t, "y: fresh\n", readWork(t, other, "y.yaml"))
			fsck(t, bare)
		})
	}
}

// TestRemoteFileNeedsGit: go-git serves a file:// remote with git's own
// upload-pack and receive-pack; without git on PATH, a fetch or push says
// so and what to do, not `exec: "git": executable file not found`.
func TestRemoteFileNeedsGit(t *testing.T) {
	bare := gitremote.Bare(t)
	s := home(t, map[string]string{"x.yaml": "x: 1\n"})
	r := attach(t, s, gitremote.FileURL(bare), nil)
	t.Setenv("PATH", t.TempDir())
	_, err := r.Fetch(t.Context())
	require.ErrorIs(t, err, gitstore.ErrRemote)
	assert.Contains(t, err.Error(), "a file:// remote needs the git command, which is not on PATH")
	assert.Contains(t, err.Error(), "install git, or give an https:// or ssh:// URL")
	err = r.Push(t.Context())
	require.ErrorIs(t, err, gitstore.ErrRemote)
	assert.Contains(t, err.Error(), "a file:// remote needs the git command")
}
