package gitstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// NewRemote attaches a remote to s, which must be writable (the holder of
// the home lock). A store has at most one Remote; Close detaches it. It
// does no I/O on the network: Fetch, Push, Sync and Run do. In RemoteSync
// mode, from now on every Apply pushes its batch before making it
// durable.
func NewRemote(s *Store, opts *RemoteOptions) (*Remote, error) {
	if err := s.writable("attach a remote"); err != nil {
		return nil, err
	}
	if opts == nil || strings.TrimSpace(opts.URL) == "" {
		return nil, errors.New("gitstore: RemoteOptions.URL is empty: give the remote's URL (file:///path, https://host/path, ssh://host/path)")
	}
	o := *opts
	if o.Mode != RemoteAsync && o.Mode != RemoteSync {
		return nil, fmt.Errorf("gitstore: RemoteOptions.Mode %d is neither RemoteAsync nor RemoteSync", o.Mode)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultRemoteInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultRemoteTimeout
	}
	creds := CredentialsFromEnv()
	if o.Credentials != nil {
		creds = *o.Credentials
	}
	branch := o.Branch
	if branch == "" {
		branch = strings.TrimPrefix(s.branch, "refs/heads/")
	}
	r := &Remote{s: s, opts: o, creds: creds, red: newRedactor(o.URL, creds),
		branch:   plumbing.NewBranchReferenceName(branch),
		track:    plumbing.NewRemoteReferenceName(DefaultRemoteName, branch),
		kick:     make(chan struct{}, 1),
		fetchNow: make(chan struct{}, 1),
	}
	if err := r.branch.Validate(); err != nil {
		return nil, fmt.Errorf("gitstore: remote branch %q is not a valid branch name", branch)
	}
	r.log = o.Logger
	if r.log == nil {
		r.log = s.log
	}
	r.log = r.log.With("remote", r.red.safe)
	r.status = RemoteStatus{URL: r.red.safe, Mode: o.Mode.String(), Branch: branch}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remote != nil {
		return nil, fmt.Errorf("gitstore: %s has a remote already (%s); close it first", s.dir, s.remote.red.safe)
	}
	// What this store last saw of the remote, from the tracking ref.
	if ref, err := s.repo.Reference(r.track, false); err == nil && ref.Type() == plumbing.HashReference {
		if _, err := s.repo.CommitObject(ref.Hash()); err == nil {
			r.seen, r.seenOK = ref.Hash(), true
			r.known = append(r.known, ref.Hash())
		}
	}
	s.remote = r
	s.headMoved = r.kick
	return r, nil
}

// Close detaches r from its store: Apply no longer pushes. It does not
// wait for Run, which its caller stops by cancelling its context.
func (r *Remote) Close() error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remote == r {
		s.remote, s.headMoved = nil, nil
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}

// Status returns where the store stands with the remote, as of the last
// fetch or push.
func (r *Remote) Status() RemoteStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	st.Conflicts = append([]string(nil), st.Conflicts...)
	return st
}

// Mode returns the remote's mode.
func (r *Remote) Mode() RemoteMode { return r.opts.Mode }

// URL returns the remote's URL, its password replaced.
func (r *Remote) URL() string { return r.red.safe }

// seenNow returns what the remote's branch held when this store last
// looked, and whether it has looked.
func (r *Remote) seenNow() (plumbing.Hash, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen, r.seenOK
}

// maxKnown bounds the commits a Remote remembers the remote had.
const maxKnown = 64

// saw records that the remote's branch holds h (ZeroHash: no branch).
func (r *Remote) saw(h plumbing.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen, r.seenOK = h, true
	r.addKnownLocked(h)
}

// addKnown records that the remote has commit h (a tip it had, a merge
// base): a push stops looking for objects to send there.
func (r *Remote) addKnown(hs ...plumbing.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range hs {
		r.addKnownLocked(h)
	}
}

func (r *Remote) addKnownLocked(h plumbing.Hash) {
	if h.IsZero() {
		return
	}
	for _, k := range r.known {
		if k == h {
			return
		}
	}
	r.known = append(r.known, h)
	if len(r.known) > maxKnown {
		r.known = r.known[len(r.known)-maxKnown:]
	}
}

func (r *Remote) knownNow() []plumbing.Hash {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]plumbing.Hash(nil), r.known...)
}

// fetchObjects fetches the remote branch's commit and the objects this
// store lacks, durably, records the commit in the tracking ref
// (refs/remotes/origin/<branch>) and returns it (ZeroHash when the remote
// has no such branch). The caller holds pushMu.
func (r *Remote) fetchObjects(ctx context.Context) (plumbing.Hash, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	tr, ep, auth, err := r.endpoint("fetch")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sess, err := tr.NewUploadPackSession(ep, auth)
	if err != nil {
		return plumbing.ZeroHash, r.wireError("fetch", err)
	}
	defer sess.Close()
	h, ar, err := r.advertised(ctx, sess)
	if err != nil {
		return plumbing.ZeroHash, r.wireError("fetch", err)
	}
	if !h.IsZero() && !r.s.hasCommit(h) {
		if err := r.download(ctx, sess, ar, h, r.s.haves(r.knownNow())); err != nil {
			return plumbing.ZeroHash, r.wireError("fetch", err)
		}
		if err := failpoint.Hit("gitstore.fetch-after-pack"); err != nil {
			return plumbing.ZeroHash, r.red.errorf("fetch", false, "%v", err)
		}
		if err := r.s.refreshObjects(); err != nil {
			return plumbing.ZeroHash, err
		}
		if !r.s.hasCommit(h) {
			return plumbing.ZeroHash, r.red.errorf("fetch", false, "the remote sent no commit %s for %s", h, r.branch)
		}
	}
	// A commit of this store's that a push sent may still be only in
	// memory, waiting for a flush: the tracking ref would then name an
	// object the files lack, which git fsck and a crash would find. The
	// next fetch after the flush records it.
	if !h.IsZero() && r.s.onDisk(h) {
		if err := r.s.writeTracking(r.track, h); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("gitstore: record the remote's %s at %s: %w", r.branch.Short(), h, err)
		}
	}
	r.saw(h)
	return h, nil
}

// hasCommit reports whether the repository (or memory) holds commit h.
func (s *Store) hasCommit(h plumbing.Hash) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.repo.CommitObject(h)
	return err == nil
}

// onDisk reports whether object h, which the store holds, is in the
// repository's files rather than only in memory waiting for a flush.
func (s *Store) onDisk(h plumbing.Hash) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.mem[h]
	return !ok || m.flushed
}

// haves returns the commits a fetch tells the remote this store has: the
// last commit and those of known that are here.
func (s *Store) haves(known []plumbing.Hash) []plumbing.Hash {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []plumbing.Hash
	for _, h := range append([]plumbing.Hash{s.headHash}, known...) {
		if h.IsZero() {
			continue
		}
		if _, err := s.repo.CommitObject(h); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// refreshObjects makes the store see the packs a fetch wrote, with no
// flushMu held (see freshView, which also says why the view cannot miss a
// pack Maintain's flush writes nor list one its packing deletes). It
// counts packGen first, so that a view Maintain listed before the
// fetch's pack was there is not used.
func (s *Store) refreshObjects() error {
	s.mu.Lock()
	s.packGen++
	s.mu.Unlock()
	return s.freshView()
}

// writeTracking writes the tracking ref name to h, atomically and
// durably: go-git would truncate and rewrite it.
func (s *Store) writeTracking(name plumbing.ReferenceName, h plumbing.Hash) error {
	path := filepath.Join(s.gitDir, filepath.FromSlash(name.String()))
	if cur, err := os.ReadFile(path); err == nil && string(cur) == h.String()+"\n" {
		return nil
	}
	if err := atomicfile.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, []byte(h.String()+"\n"), 0o644)
}

// Fetch fetches the remote's branch and brings this store up to it: when
// the remote is behind or equal nothing changes; when this store is
// behind it fast-forwards (the remote's commits become its history, their
// files put in place through Apply's two barriers, all or nothing); when
// the two have diverged it merges, losing neither side (see Integration).
// It returns once the result is durable and in place.
func (r *Remote) Fetch(ctx context.Context) (Integration, error) {
	r.pushMu.Lock()
	h, err := r.fetchObjects(ctx)
	r.pushMu.Unlock()
	r.fetched(err)
	if err != nil {
		return Integration{}, err
	}
	in, err := r.integrate(h)
	r.counted()
	if err != nil {
		r.failed(err)
	}
	return in, err
}

// Push sends this store's commits to the remote and moves its branch to
// this store's last commit, if the remote's branch is where this store
// last saw it (a fetch sets that): a compare-and-swap, never a force. A
// remote that moved gives an error matching ErrRemoteMoved, after
// fetching what it holds; Fetch then merges it. A remote whose history
// this store has not merged yet is refused the same way.
func (r *Remote) Push(ctx context.Context) error {
	if !r.mayPush() {
		return fmt.Errorf("gitstore: push %s: %w", r.red.safe, ErrNotWriter)
	}
	s := r.s
	s.mu.Lock()
	head := s.headHash
	s.mu.Unlock()
	if seen, looked := r.seenNow(); looked && seen == head {
		return nil // nothing the remote lacks, as far as this store knows
	}
	err := r.pushTo(ctx, head)
	r.counted()
	return err
}

// mayPush reports whether this store may move the remote's branch now
// (RemoteOptions.MayPush).
func (r *Remote) mayPush() bool { return r.opts.MayPush == nil || r.opts.MayPush() }

// pushTo pushes commit n (and its history) to the remote branch.
func (r *Remote) pushTo(ctx context.Context, n plumbing.Hash) error {
	if n.IsZero() {
		return nil
	}
	r.pushMu.Lock()
	err := r.pushLocked(ctx, n)
	r.pushMu.Unlock()
	r.pushed(err)
	if errors.Is(err, ErrRemoteMoved) {
		select {
		case r.fetchNow <- struct{}{}:
		default:
		}
	}
	return err
}

// pushLocked is pushTo for a caller holding pushMu.
func (r *Remote) pushLocked(ctx context.Context, n plumbing.Hash) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	tr, ep, auth, err := r.endpoint("push")
	if err != nil {
		return err
	}
	sess, err := tr.NewReceivePackSession(ep, auth)
	if err != nil {
		return r.wireError("push", err)
	}
	defer sess.Close()
	cur, ar, err := r.advertised(ctx, sess)
	if err != nil {
		return r.wireError("push", err)
	}
	expect, looked := r.seenNow()
	if !looked {
		expect = cur // never fetched: the push must still be a fast-forward of what is there
	}
	if cur == n {
		r.saw(n)
		return nil
	}
	if cur != expect {
		return r.moved(ctx, expect, cur)
	}
	objs, hashes, ff, err := r.s.pushObjects(n, expect, r.knownNow())
	if err != nil {
		return fmt.Errorf("gitstore: push %s: collect the objects of %s: %w", r.red.safe, n, err)
	}
	if !ff {
		return r.red.errorf("push", true, "the remote's %s is at %s, which this home has not merged yet; "+
			"nothing was pushed (the next fetch merges it)", r.branch.Short(), short7(cur))
	}
	if err := r.upload(ctx, sess, ar, expect, n, objs, hashes); err != nil {
		var refused *refusedPush
		if errors.As(err, &refused) {
			// Another writer updated the branch between the
			// advertisement and the update.
			return r.moved(ctx, expect, plumbing.ZeroHash)
		}
		return r.wireError("push", err)
	}
	r.saw(n)
	// The remote has n; in sync mode nothing here is durable yet.
	if err := failpoint.Hit("gitstore.push-after-remote"); err != nil {
		return r.red.errorf("push", false, "%v (the remote has %s)", err, short7(n))
	}
	return nil
}

// moved fetches what another writer pushed and returns the error that
// says so. cur is what the remote advertised (ZeroHash: not known).
func (r *Remote) moved(ctx context.Context, expect, cur plumbing.Hash) error {
	got, ferr := r.fetchObjects(ctx)
	if ferr == nil {
		cur = got
	}
	at := "elsewhere"
	if !cur.IsZero() {
		at = "at " + short7(cur)
	}
	fetched := "fetched it; the next fetch merges it"
	if ferr != nil {
		fetched = "fetching it failed too (" + ferr.Error() + ")"
	}
	return r.red.errorf("push", true, "another writer moved the remote: its %s is %s, where this home last saw %s; %s, and nothing was pushed",
		r.branch.Short(), at, orNone(expect), fetched)
}

func short7(h plumbing.Hash) string { return h.String()[:7] }

func orNone(h plumbing.Hash) string {
	if h.IsZero() {
		return "no commit"
	}
	return short7(h)
}

// pushesFirst reports whether Apply's next iteration must make the last
// batch's second barrier alone before it takes the next batch: a remote
// in sync mode pushes each batch before its first barrier, and the last
// batch's callers should not wait for that push. The caller holds loopMu.
func (s *Store) pushesFirst(prev *batch) bool {
	if prev == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remote != nil && s.remote.opts.Mode == RemoteSync
}

// pushBatch pushes batch b to a remote in sync mode, before b is durable
// here. The error says the change was made nowhere. The caller holds
// loopMu.
func (s *Store) pushBatch(b *batch) error {
	s.mu.Lock()
	r := s.remote
	s.mu.Unlock()
	if r == nil || r.opts.Mode != RemoteSync {
		return nil
	}
	tip := b.commits[len(b.commits)-1].hash
	if !r.mayPush() {
		if seen, _ := r.seenNow(); seen == tip {
			return nil // a fast-forward to the remote's own commit
		}
		return fmt.Errorf("gitstore: push %s: %w; the change was not made, here or on the remote (sync mode makes a change only once the remote has it)",
			r.red.safe, ErrNotWriter)
	}
	err := r.pushTo(context.Background(), tip)
	if err == nil {
		return nil
	}
	var re *RemoteError
	if errors.As(err, &re) {
		copied := *re
		copied.Msg += "; the change was not made, here or on the remote (sync mode makes a change only once the remote has it)"
		return &copied
	}
	return fmt.Errorf("%w; the change was not made, here or on the remote", err)
}

// fetched, pushed and failed record the outcome of a step in the status;
// counted recounts ahead and behind. Each calls OnStatus.
func (r *Remote) fetched(err error) {
	r.mu.Lock()
	if err == nil {
		r.status.LastFetch = time.Now().UTC()
	}
	r.setErrLocked(err)
	r.mu.Unlock()
}

func (r *Remote) pushed(err error) {
	r.mu.Lock()
	if err == nil {
		r.status.LastPush = time.Now().UTC()
	}
	r.setErrLocked(err)
	r.mu.Unlock()
}

func (r *Remote) failed(err error) {
	r.mu.Lock()
	r.setErrLocked(err)
	r.mu.Unlock()
}

func (r *Remote) setErrLocked(err error) {
	if err == nil {
		r.status.Error = ""
		return
	}
	r.status.Error = r.red.clean(err.Error())
}

// maxCount bounds the commits counted for Ahead and Behind.
const maxCount = 10000

// counted recounts the commits each side lacks and the conflict tags,
// and reports the status.
func (r *Remote) counted() {
	seen, _ := r.seenNow()
	ahead, behind, oldest, head := r.s.aheadBehind(seen, r.knownNow())
	conflicts, err := r.s.Conflicts()
	r.mu.Lock()
	r.status.Head, r.status.Remote = hashOrEmpty(head), hashOrEmpty(seen)
	r.status.Ahead, r.status.Behind, r.status.OldestUnpushed = ahead, behind, oldest
	if err == nil {
		r.status.Conflicts = r.status.Conflicts[:0]
		for _, c := range conflicts {
			r.status.Conflicts = append(r.status.Conflicts, c.Tag)
		}
	}
	st := r.status
	on := r.opts.OnStatus
	r.mu.Unlock()
	if on != nil {
		on(st)
	}
}

func hashOrEmpty(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}
