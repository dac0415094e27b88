// Package etcdlock elects the one active writer of a home served by
// several hosts, with an etcd lease: a lifecycle.Elector for
// lifecycle.Options.Elector.
//
// Each candidate holds a lease of Config.TTL and campaigns with it in an
// election of etcd's concurrency package at <Prefix><Name>/writer/; the
// candidate whose claim etcd created first is the writer while its lease
// lives. The lease is renewed every third of its TTL, and the term keeps
// a deadline of its own: the time the last renewal was sent plus the TTL,
// a time before which etcd cannot have let the lease expire. Term.Held
// reads that deadline, so a process that was stopped, or cut off from
// etcd, past it stops acting as the writer without asking anyone;
// Term.Check also asks etcd, in a transaction that compares the claim's
// create revision (the term's fencing token), whether the claim is still
// there. A term whose renewals fail is not Held, but it is not over: if
// etcd comes back with the lease alive (a restarted etcd extends every
// lease by its TTL) the same term holds again, and no other writer can
// have been elected meanwhile, since the claim was there all along.
//
// What it does not guarantee: that a writer which passed Check does not
// act after its lease ends (a process paused between a check and a write
// acts late; the harness checks again before acknowledging, and a resource
// that must refuse late writes needs the fencing token or a
// compare-and-swap of its own), nor anything if this machine's monotonic
// clock stops while etcd's runs (a suspended laptop): Held would then be
// too hopeful, and only Check would notice.
package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// ErrTermOver matches the error of a term that has ended: its lease
// expired or was revoked, its claim was deleted, or it was resigned.
var ErrTermOver = errors.New("etcdlock: the writer's term is over")

// ErrClosed is returned by the methods of a closed Elector.
var ErrClosed = errors.New("etcdlock: elector closed")

// Elector elects a home's writer among hosts with an etcd lease. Make it
// with New; it is safe for concurrent use.
type Elector struct {
	cfg    Config
	pfx    string // the election's prefix, without the trailing slash
	client *clientv3.Client
	log    *slog.Logger
	wg     sync.WaitGroup  // the terms' keep-alive loops and abandoned campaigns
	ctx    context.Context // ends when Close begins: bounds the revokes of abandoned terms
	stop   context.CancelFunc

	mu     sync.Mutex
	closed bool
	terms  map[*term]struct{}
}

var _ lifecycle.Elector = (*Elector)(nil)

// New returns an Elector for the home called name (Config.Name overrides
// it) on the cluster cfg names. It checks cfg and loads the TLS files,
// naming what is wrong, and makes a client that connects when first used:
// an etcd that is down is no error here. Close it when done (the harness
// does, when Run returns). logger nil means discard.
func New(cfg Config, name string, logger *slog.Logger) (*Elector, error) {
	if err := cfg.Check(name); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cc := clientv3.Config{
		Endpoints: cfg.Endpoints,
		// No DialTimeout: New does not wait for the cluster. gRPC
		// pings find a dead connection (etcd refuses pings more often
		// than every 5 s).
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
	}
	if cfg.Secure() {
		info := transport.TLSInfo{CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, TrustedCAFile: cfg.CAFile}
		tlsConfig, err := info.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcdlock: TLS files (cert %q, key %q, cacert %q): %w", cfg.CertFile, cfg.KeyFile, cfg.CAFile, err)
		}
		cc.TLS = tlsConfig
	}
	client, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: client for %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Elector{
		ctx:    ctx,
		stop:   stop,
		cfg:    cfg,
		pfx:    path.Join(cfg.Prefix, cfg.Name, "writer"),
		client: client,
		log:    logger.With("etcd", strings.Join(cfg.Endpoints, ",")),
		terms:  map[*term]struct{}{},
	}, nil
}

// Config returns the Elector's settings, defaults filled in.
func (e *Elector) Config() Config { return e.cfg }

// Key returns the prefix of the election's keys, <Prefix><Name>/writer/.
func (e *Elector) Key() string { return e.pfx + "/" }

// Campaign blocks until this server is the writer, or ctx ends. It grants
// a lease of Config.TTL, keeps it alive, and campaigns with it, value
// published as the claim's value. When ctx ends it returns at once; the
// claim is withdrawn in the background (or, if etcd does not answer, left
// to expire with its lease).
func (e *Elector) Campaign(ctx context.Context, value string) (lifecycle.Term, error) {
	type result struct {
		t   *term
		err error
	}
	done, gone := make(chan result), make(chan struct{})
	if !e.goOwned(func() {
		t, err := e.campaign(ctx, value)
		select {
		case done <- result{t, err}:
		case <-gone: // the caller left: end a term won too late
			if t != nil {
				t.abandon()
			}
		}
	}) {
		return nil, ErrClosed
	}
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		return r.t, nil
	case <-ctx.Done():
		close(gone)
		return nil, ctx.Err()
	}
}

func (e *Elector) campaign(ctx context.Context, value string) (*term, error) {
	sent := time.Now()
	grant, err := e.client.Grant(ctx, int64(e.cfg.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcdlock: grant a lease at %s: %w", strings.Join(e.cfg.Endpoints, ","), err)
	}
	ttl := time.Duration(grant.TTL) * time.Second
	t := newTerm(e, grant.ID, ttl, sent.Add(ttl))
	if !e.add(t) {
		t.abandon()
		return nil, ErrClosed
	}
	e.goOwned(t.keepAlive)
	session, err := concurrency.NewSession(e.client, concurrency.WithLease(grant.ID), concurrency.WithContext(t.ctx))
	if err != nil {
		t.abandon()
		return nil, fmt.Errorf("etcdlock: session on lease %x: %w", grant.ID, err)
	}
	t.election = concurrency.NewElection(session, e.pfx)

	// Stop waiting when the lease is lost while in line: the claim went
	// with it.
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(t.ctx, stop)()
	if err := t.election.Campaign(cctx, value); err != nil {
		t.abandon()
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			err = t.over()
		}
		return nil, fmt.Errorf("etcdlock: campaign at %s: %w", e.Key(), err)
	}
	t.key, t.rev = t.election.Key(), t.election.Rev()
	// Campaign returns once every earlier claim is gone, but does not say
	// whether this one outlived the wait: ask.
	if err := t.Check(ctx); err != nil {
		t.abandon()
		return nil, err
	}
	e.log.Debug("elected", "key", t.key, "term", t.rev, "lease", fmt.Sprintf("%x", t.lease), "ttl", ttl)
	return t, nil
}

// Leader returns the value the writer published, "" when none is elected.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	resp, err := e.client.Get(ctx, e.Key(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("etcdlock: read the writer at %s: %w", e.Key(), err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Close ends every term and campaign of e, without resigning (resign
// first for a prompt handover: the claims are left to expire), and closes
// the client.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.stop()
	terms := e.terms
	e.terms = nil
	e.mu.Unlock()
	for t := range terms {
		t.end(ErrClosed)
	}
	err := e.client.Close() // ends calls in flight, resigns of abandoned campaigns among them
	e.wg.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// goOwned runs f on a goroutine Close waits for, unless e is closed.
func (e *Elector) goOwned(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Go(f)
	return true
}

func (e *Elector) add(t *term) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.terms[t] = struct{}{}
	return true
}

func (e *Elector) remove(t *term) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.terms, t)
}
