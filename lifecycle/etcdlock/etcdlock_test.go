package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock"
)

const ttl = 2 * time.Second

func newElector(t *testing.T, srv *etcdtest.Server) *etcdlock.Elector {
	t.Helper()
	el, err := etcdlock.New(etcdlock.Config{Endpoints: []string{srv.URL}, TTL: ttl,
		CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: srv.CAFile}, "home", nil)
	require.NoError(t, err)
	t.Cleanup(func() { el.Close() })
	return el
}

func campaign(t *testing.T, el *etcdlock.Elector, value string) lifecycle.Term {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	term, err := el.Campaign(ctx, value)
	require.NoError(t, err)
	return term
}

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCampaignElectsAndPublishes(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	el := newElector(t, srv)
	term := campaign(t, el, "value-a")
	assert.True(t, term.Held())
	assert.Positive(t, term.Token())
	require.NoError(t, term.Check(t.Context()))
	leader, err := el.Leader(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "value-a", leader)

	require.NoError(t, term.Resign(t.Context()))
	assert.False(t, term.Held())
	assert.ErrorIs(t, term.Check(t.Context()), etcdlock.ErrTermOver)
	select {
	case <-term.Done():
	default:
		t.Fatal("Done is open after Resign")
	}
	leader, err = el.Leader(t.Context())
	require.NoError(t, err)
	assert.Empty(t, leader, "no writer after the only one resigned")
}

// The client this module uses must work with the etcd Debian ships (3.4):
// the calls of an election, a lease and a transaction, and the version.
func TestServerVersion(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.URL}})
	require.NoError(t, err)
	defer c.Close()
	st, err := c.Status(t.Context(), srv.URL)
	require.NoError(t, err)
	t.Logf("etcd server %s", st.Version)
	assert.NotEmpty(t, st.Version)
}

func TestSecondWaitsForTheFirst(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	a, b := newElector(t, srv), newElector(t, srv)
	ta := campaign(t, a, "a")

	elected := make(chan lifecycle.Term, 1)
	go func() {
		tb, err := b.Campaign(t.Context(), "b")
		if err == nil {
			elected <- tb
		}
		close(elected)
	}()
	// b is in line: a's claim is the first, and stays so while a holds.
	for range 5 {
		require.NoError(t, ta.Check(t.Context()))
		leader, err := b.Leader(t.Context())
		require.NoError(t, err)
		require.Equal(t, "a", leader)
		select {
		case <-elected:
			t.Fatal("b was elected while a holds its term")
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.NoError(t, ta.Resign(t.Context()))
	tb, ok := <-elected
	require.True(t, ok, "b's campaign failed")
	assert.True(t, tb.Held())
	assert.Greater(t, tb.Token(), ta.Token(), "fencing tokens grow")
	leader, err := a.Leader(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "b", leader)
}

// A writer that stops renewing (here: its Elector closed without
// resigning, as a process killed) loses its claim with its lease, and the
// next candidate is elected.
func TestExpiredLeaseElectsTheNext(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	a, b := newElector(t, srv), newElector(t, srv)
	ta := campaign(t, a, "a")
	require.NoError(t, a.Close())
	assert.False(t, ta.Held())
	tb := campaign(t, b, "b")
	require.NoError(t, tb.Check(t.Context()))
}

func TestDeletedClaimEndsTheTerm(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	el := newElector(t, srv)
	term := campaign(t, el, "a")
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.URL}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Delete(t.Context(), el.Key(), clientv3.WithPrefix())
	require.NoError(t, err)
	assert.ErrorIs(t, term.Check(t.Context()), etcdlock.ErrTermOver)
	assert.False(t, term.Held())
	<-term.Done()
}

// etcd down: the term stops holding once its lease cannot be renewed,
// without ending; etcd back with the lease alive: the same term holds
// again.
func TestEtcdDownAndBack(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	el := newElector(t, srv)
	term := campaign(t, el, "a")
	token := term.Token()
	srv.Stop()
	eventually(t, 3*ttl, func() bool { return !term.Held() }, "the term still holds with etcd down")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	err := term.Check(ctx)
	cancel()
	require.Error(t, err)
	assert.NotErrorIs(t, err, etcdlock.ErrTermOver, "the lease may be alive: the term is not over")
	select {
	case <-term.Done():
		t.Fatalf("the term ended with etcd down: %v", err)
	default:
	}
	srv.Restart()
	eventually(t, 3*ttl, term.Held, "the term does not hold again after etcd came back")
	require.NoError(t, term.Check(t.Context()))
	assert.Equal(t, token, term.Token())
}

func TestCampaignReturnsWhenCtxEnds(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	a, b := newElector(t, srv), newElector(t, srv)
	campaign(t, a, "a")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := b.Campaign(ctx, "b")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	leader, err := b.Leader(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "a", leader)

	// b's claim is withdrawn, not left to expire.
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.URL}})
	require.NoError(t, err)
	defer c.Close()
	eventually(t, ttl/2, func() bool {
		resp, err := c.Get(t.Context(), b.Key(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1
	}, "b's claim is still there")
}

func TestClosedElector(t *testing.T) {
	srv := etcdtest.Start(t, nil)
	el := newElector(t, srv)
	require.NoError(t, el.Close())
	require.NoError(t, el.Close(), "a second Close does nothing")
	_, err := el.Campaign(t.Context(), "a")
	assert.True(t, errors.Is(err, etcdlock.ErrClosed), "got %v", err)
}

func TestTLS(t *testing.T) {
	srv := etcdtest.Start(t, &etcdtest.Options{TLS: true})
	el := newElector(t, srv)
	term := campaign(t, el, "a")
	require.NoError(t, term.Check(t.Context()))

	// Without the client certificate the cluster refuses the client.
	bare, err := etcdlock.New(etcdlock.Config{Endpoints: []string{srv.URL}, TTL: ttl, CAFile: srv.CAFile}, "home", nil)
	require.NoError(t, err)
	defer bare.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = bare.Leader(ctx)
	assert.Error(t, err)
}
