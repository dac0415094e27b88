package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// abandonTimeout bounds the revoke of a lease given up without a caller
// waiting (a campaign that lost its caller, a failed start).
const abandonTimeout = 2 * time.Second

// term is one candidacy with its lease, and once elected one term as the
// writer: a lifecycle.Term.
type term struct {
	e        *Elector
	lease    clientv3.LeaseID
	ttl      time.Duration
	election *concurrency.Election // nil until the session is made
	key      string                // the claim, once elected
	rev      int64                 // the claim's create revision: the fencing token
	ctx      context.Context       // ends with the term; its cause says why
	cancel   context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time // etcd cannot have expired the lease before this
	failing  error     // the last renewal's error; nil once one succeeds
}

func newTerm(e *Elector, lease clientv3.LeaseID, ttl time.Duration, deadline time.Time) *term {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &term{e: e, lease: lease, ttl: ttl, ctx: ctx, cancel: cancel, deadline: deadline}
}

// Held reports whether the lease is sure to be alive: the last renewal was
// sent less than its TTL ago. It asks no one.
func (t *term) Held() bool {
	if t.ctx.Err() != nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Now().Before(t.deadline)
}

// Check confirms with etcd that the term's claim is still there, with its
// create revision: a transaction that compares it. An error says why not:
// the term over (ErrTermOver), the lease not renewed in time, or etcd not
// answering within ctx.
func (t *term) Check(ctx context.Context) error {
	if err := t.over(); err != nil {
		return err
	}
	if !t.Held() {
		return t.unrenewed()
	}
	resp, err := t.e.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).Commit()
	if err != nil {
		return fmt.Errorf("etcdlock: confirm term %d of the writer with etcd at %s: %w", t.rev, strings.Join(t.e.cfg.Endpoints, ","), err)
	}
	if !resp.Succeeded {
		err := fmt.Errorf("%w: its claim %s is gone (its lease expired or was revoked)", ErrTermOver, t.key)
		t.end(err)
		return err
	}
	if !t.Held() { // the lease ran out while etcd was asked
		return t.unrenewed()
	}
	return nil
}

// Done is closed when the term has ended for good.
func (t *term) Done() <-chan struct{} { return t.ctx.Done() }

// Token is the claim's create revision.
func (t *term) Token() int64 { return t.rev }

// Resign ends the term, then deletes its claim and revokes its lease, so
// that the next candidate is elected at once. The term stops holding
// before the claim goes: no moment has two writers.
func (t *term) Resign(ctx context.Context) error {
	t.end(fmt.Errorf("%w: resigned", ErrTermOver))
	var err error
	if t.election != nil {
		err = t.election.Resign(ctx)
	}
	if _, rerr := t.e.client.Revoke(ctx, t.lease); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("etcdlock: resign term %d (lease %x; it expires within %v anyway): %w", t.rev, t.lease, t.ttl, err)
	}
	return nil
}

// abandon ends a candidacy or term no one will use, revoking its lease so
// that its claim goes at once; if etcd does not answer, the lease expires.
func (t *term) abandon() {
	t.end(fmt.Errorf("%w: abandoned", ErrTermOver))
	ctx, cancel := context.WithTimeout(t.e.ctx, abandonTimeout)
	defer cancel()
	t.e.client.Revoke(ctx, t.lease) // best effort: the lease expires anyway
}

// end ends the term with cause (the first cause stays).
func (t *term) end(cause error) {
	t.cancel(cause)
	t.e.remove(t)
}

// over returns why the term ended, or nil while it has not.
func (t *term) over() error {
	if t.ctx.Err() == nil {
		return nil
	}
	return context.Cause(t.ctx)
}

// unrenewed is the error of a term whose lease was not renewed in time.
func (t *term) unrenewed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	why := "no renewal was made since: this process was paused, or etcd did not answer"
	if t.failing != nil {
		why = "the last renewal failed: " + t.failing.Error()
	}
	return fmt.Errorf("etcdlock: the writer's lease %x was not renewed in time (it was sure until %s; %s): changes are refused until etcd answers again",
		t.lease, t.deadline.Format(time.RFC3339Nano), why)
}

// keepAlive renews the lease every third of its TTL until the term ends,
// moving the deadline to the time each successful renewal was sent plus
// the TTL. A failed renewal is tried again at once (KeepAliveOnce itself
// retries while etcd is unavailable); a lease etcd no longer has ends the
// term.
func (t *term) keepAlive() {
	interval := max(t.ttl/3, 100*time.Millisecond)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		kctx, cancel := context.WithTimeout(t.ctx, interval)
		resp, err := t.e.client.KeepAliveOnce(kctx, t.lease)
		cancel()
		next := interval
		switch {
		case err == nil:
			t.renewed(sent.Add(time.Duration(resp.TTL) * time.Second))
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			t.end(fmt.Errorf("%w: its lease %x expired (it was not renewed within %v)", ErrTermOver, t.lease, t.ttl))
			return
		case t.ctx.Err() != nil:
			return
		default:
			t.failed(err)
			next = 50 * time.Millisecond
		}
		timer.Reset(next)
	}
}

func (t *term) renewed(deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if deadline.After(t.deadline) {
		t.deadline = deadline
	}
	if t.failing != nil {
		t.e.log.Info("etcd answers again: the lease is renewed", "lease", fmt.Sprintf("%x", t.lease), "term", t.rev)
		t.failing = nil
	}
}

func (t *term) failed(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failing == nil {
		t.e.log.Warn("cannot renew the lease; as the writer, this server refuses changes once it runs out",
			"lease", fmt.Sprintf("%x", t.lease), "term", t.rev, "until", t.deadline, "err", err)
	}
	t.failing = err
}
