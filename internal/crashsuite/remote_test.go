package crashsuite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
)

// remoteSetup is the workload of a git remote (issue 15): a bare
// repository reached as a file:// URL, a helios home replicated to it in
// sync mode, and a peer, a second writer (a gitstore store in this
// process), that changes the file the home changes, so that each start
// fetches the peer's objects, merges a conflict (writing its conflicts
// tag) and pushes the merge.
type remoteSetup struct {
	bare, url string
	home      *home
	peer      *gitstore.Store
	peerR     *gitstore.Remote
	n         int
}

// useRemote makes the remote workload's home the iteration's, making the
// workload first when there is none, and prepares a conflict for the
// start to merge.
func (s *suite) useRemote(ctx context.Context) error {
	if s.remote == nil {
		r, err := s.makeRemote(ctx)
		if err != nil {
			return fmt.Errorf("make the git remote workload: %w", err)
		}
		s.remote = r
	}
	s.cur.home = s.remote.home
	return s.remote.diverge(ctx)
}

// makeRemote makes the bare repository, installs a home on it (helios
// pushes its history at the stop) and clones it into the peer.
func (s *suite) makeRemote(ctx context.Context) (*remoteSetup, error) {
	s.homes++
	dir := fmt.Sprintf("%s/remote-%d", s.dir, s.homes)
	r := &remoteSetup{bare: filepath.Join(dir, "remote.git")}
	r.url = "file://" + r.bare
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if _, err := git(ctx, dir, nil, "init", "-q", "--bare", "--initial-branch=main", r.bare); err != nil {
		return nil, err
	}
	// No automatic gc: after a push, receive-pack starts git gc --auto in
	// the background once enough loose objects have come (some thousand,
	// a thousand iterations into a run), and its prune of packed loose
	// objects races the check's git fsck of the remote ("unable to mmap
	// ./objects/..: No such file or directory"): git's housekeeping on the
	// remote, not the server's doing.
	if _, err := git(ctx, r.bare, nil, "config", "gc.auto", "0"); err != nil {
		return nil, err
	}
	r.home = newHome(filepath.Join(dir, "home"))
	r.home.remote = r.url
	cmd := s.cmd(r.home, "")
	cmd.Stdin = strings.NewReader("") // install, push at the stop
	p, err := crashtest.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := p.Wait(); err != nil {
		return nil, fmt.Errorf("install %s: %w; stderr:\n%s", r.home.dir, err, p.Stderr())
	}
	if r.peer, err = gitstore.Init(filepath.Join(dir, "peer"), &gitstore.Options{HoldsLock: true}); err != nil {
		return nil, err
	}
	s.t.Cleanup(func() { r.peer.Close() })
	if r.peerR, err = gitstore.NewRemote(r.peer, &gitstore.RemoteOptions{URL: r.url, Credentials: &gitstore.Credentials{}}); err != nil {
		return nil, err
	}
	in, err := r.peerR.Fetch(ctx)
	if err != nil {
		return nil, err
	}
	if in.Action != gitstore.ActionFastForward {
		return nil, fmt.Errorf("the peer's first fetch of %s: %s, want a fast-forward (did the install push?)", r.url, in.Action)
	}
	return r, nil
}

// diverge has the peer change default.yaml on the remote, and edits the
// home's default.yaml by hand (the start commits it as recovered): at
// the next start both sides have changed one file. Neither touches a key
// the suite's model tracks.
func (r *remoteSetup) diverge(ctx context.Context) error {
	r.n++
	if _, err := r.peerR.Fetch(ctx); err != nil {
		return fmt.Errorf("peer fetch: %w", err)
	}
	rel := personaFile("default")
	var p persona
	if err := atomicfile.ReadYAMLStrict(filepath.Join(r.peer.Dir(), rel), &p); err != nil {
		return err
	}
	p.Preferences["peer_note"] = fmt.Sprintf("peer %d", r.n)
	data, err := atomicfile.EncodeYAML(rel, p)
	if err != nil {
		return err
	}
	c, err := r.peer.Stage(fmt.Sprintf("peer %d", r.n), []gitstore.Change{{Path: rel, Data: data}})
	if err != nil {
		return err
	}
	if err := c.Wait(); err != nil {
		return err
	}
	if err := r.peerR.Push(ctx); err != nil {
		return fmt.Errorf("peer push: %w", err)
	}
	path := filepath.Join(r.home.configDir(), rel)
	var mine persona
	if err := atomicfile.ReadYAMLStrict(path, &mine); err != nil {
		return err
	}
	if mine.Preferences == nil {
		mine.Preferences = map[string]string{}
	}
	mine.Preferences["hand_note"] = fmt.Sprintf("hand %d", r.n)
	return atomicfile.WriteYAML(path, mine, 0)
}

// checkRemote checks a home replicated in sync mode after its server
// stopped: every acknowledged commit is in the remote's history (sync
// mode acknowledges once the remote has it), the remote passes git fsck,
// and each conflict the merges tagged is named by mcpkeep sync, which
// then resolves it (a person would look first), so that doctor, run
// next, is clean.
func (c checker) checkRemote(ctx context.Context, h *home) []error {
	bare := strings.TrimPrefix(h.remote, "file://")
	var errs []error
	if err := fsck(ctx, bare); err != nil {
		errs = append(errs, err)
	}
	out, err := git(ctx, bare, nil, "rev-list", "main")
	if err != nil {
		return append(errs, err)
	}
	onRemote := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		onRemote[line] = true
	}
	for _, a := range h.acks {
		if !onRemote[a.commit] {
			errs = append(errs, &lostError{fmt.Errorf("acknowledged commit %s (%s=%q) is not on the remote, in sync mode", a.commit, a.slot(), a.Value)})
		}
	}
	tags, err := git(ctx, h.configDir(), nil, "tag", "-l", gitstore.ConflictTagPrefix+"*")
	if err != nil {
		return append(errs, err)
	}
	for tag := range strings.FieldsSeq(string(tags)) {
		if out, err := c.run(ctx, "sync", "--home", h.dir, "--resolve", tag); err != nil {
			errs = append(errs, fmt.Errorf("mcpkeep sync --resolve %s: %w: %s", tag, err, out))
		}
	}
	return errs
}

// run runs mcpkeep with args and returns its combined output.
func (c checker) run(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, c.mcpkeep, args...).CombinedOutput()
	return string(out), err
}
