package gitstore

import (
	"context"
	"errors"
	"time"
)

// When Run pushes after a commit: once no commit has come for pushQuiet,
// and at the latest pushMaxDelay after the first one waiting, so that a
// burst of changes goes out in one push and the push does not compete
// with the changes for the machine. Variables for the tests.
var (
	pushQuiet    = 50 * time.Millisecond
	pushMaxDelay = time.Second
	// firstBackoff is the wait after the first failure in a row; it
	// doubles with each one, up to the Interval.
	firstBackoff = time.Second
)

// SyncReport is what Sync did: the fetch and its integration, the push,
// and where the store stands after.
type SyncReport struct {
	Fetch  Integration  `json:"fetch"`  // what the fetch brought and how it was integrated
	Pushed bool         `json:"pushed"` // the remote took commits of this store
	Status RemoteStatus `json:"status"` // where the store stands after both
}

// Sync fetches and integrates the remote's commits (Fetch), then pushes
// this store's (Push), and reports where the store stands.
func (r *Remote) Sync(ctx context.Context) (SyncReport, error) {
	var rep SyncReport
	in, err := r.Fetch(ctx)
	rep.Fetch = in
	if err == nil && r.mayPush() {
		before, _ := r.seenNow()
		err = r.Push(ctx)
		after, _ := r.seenNow()
		rep.Pushed = err == nil && after != before
	}
	rep.Status = r.Status()
	return rep, err
}

// Run keeps the store and the remote in step until ctx is done: it
// fetches and integrates at once and then every Interval (and at once
// when a push found the remote moved), and pushes what the remote lacks
// after each fetch and, in RemoteAsync mode, after each commit (once
// commits pause for 50 ms, at the latest a second after the first). A
// failed step is logged, kept in Status, and tried again after a backoff
// that doubles from one second up to the Interval. Run returns nil when
// ctx is done, once the step in progress has finished (each is bounded
// by RemoteOptions.Timeout).
func (r *Remote) Run(ctx context.Context) error {
	now := time.Now()
	fetchAt := now // at once, unless a fetch just happened (a catch-up before serving)
	var pushAt, firstKick time.Time
	if st := r.Status(); !st.LastFetch.IsZero() && st.LastFetch.Add(r.opts.Interval).After(now) {
		fetchAt = st.LastFetch.Add(r.opts.Interval)
		if st.Ahead > 0 && r.mayPush() {
			pushAt, firstKick = now, now
		}
	}
	failures := 0
	backoff := func() time.Duration {
		failures++
		d := firstBackoff << min(failures-1, 20)
		return min(d, r.opts.Interval)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		next := fetchAt
		if !pushAt.IsZero() && pushAt.Before(next) {
			next = pushAt
		}
		timer.Reset(max(time.Until(next), 0))
		select {
		case <-ctx.Done():
			return nil
		case <-r.fetchNow:
			fetchAt = time.Now()
			continue
		case <-r.kick:
			now := time.Now()
			if pushAt.IsZero() {
				firstKick = now
			}
			pushAt = now.Add(pushQuiet)
			if limit := firstKick.Add(pushMaxDelay); pushAt.After(limit) {
				pushAt = limit
			}
			continue
		case <-timer.C:
		}
		now := time.Now()
		switch {
		case !fetchAt.After(now):
			_, err := r.Fetch(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				d := backoff()
				r.log.Warn("gitstore: fetch failed; will retry", "in", d, "err", err)
				fetchAt = time.Now().Add(d)
				continue
			}
			failures = 0
			fetchAt = time.Now().Add(r.opts.Interval)
			if r.Status().Ahead > 0 && r.mayPush() {
				pushAt, firstKick = time.Now(), time.Now()
			}
		case !pushAt.IsZero() && !pushAt.After(now):
			pushAt = time.Time{}
			if !r.mayPush() {
				continue // not the writer: the next fetch pushes once it is
			}
			err := r.Push(ctx)
			if ctx.Err() != nil {
				return nil
			}
			switch {
			case errors.Is(err, ErrRemoteMoved):
				fetchAt = time.Now() // the fetch merges it, then pushes
			case err != nil:
				d := backoff()
				r.log.Warn("gitstore: push failed; will retry", "in", d, "err", err)
				pushAt, firstKick = time.Now().Add(d), time.Now().Add(d)
			default:
				failures = 0
			}
		}
	}
}
