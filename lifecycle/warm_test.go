package lifecycle_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// Options.Warm runs in each process that becomes the writer, at its start
// or when it takes over, and never in one that attaches; Run builds the
// server without waiting for it.
func TestWarm(t *testing.T) {
	var (
		warms     atomic.Int32
		waitedFor atomic.Bool              // a Warm saw NewServer called before it returned
		builds    = make(chan struct{}, 4) // one per NewServer
	)
	opts := options(t)
	opts.Warm = func() {
		warms.Add(1)
		select {
		case <-builds: // Run went on to NewServer while this ran
			waitedFor.Store(true)
		case <-time.After(hangAfter):
		}
	}
	opts.NewServer = func(env *lifecycle.Env) (*mcp.Server, error) {
		builds <- struct{}{}
		return newServer(env)
	}

	first := run(t, opts)
	mcptest.Call[lifecycle.Route](t, first.client, "route", nil)
	first.poll(t, "Warm to see NewServer called", waitedFor.Load)
	assert.EqualValues(t, 1, warms.Load(), "the writer warms once")

	second := run(t, first.opts)
	assert.True(t, mcptest.Call[lifecycle.Route](t, second.client, "route", nil).Attached)
	assert.EqualValues(t, 1, warms.Load(), "an attached process does not warm")

	waitedFor.Store(false)
	require.NoError(t, first.stop(t))
	assert.False(t, mcptest.Call[lifecycle.Route](t, second.client, "route", nil).Attached, "it took over")
	second.poll(t, "the new writer's Warm to see NewServer called", waitedFor.Load)
	assert.EqualValues(t, 2, warms.Load(), "the process that takes over warms")
	require.NoError(t, second.stop(t))
}

// A Warm that panics is logged, and the server is built and serves all the
// same.
func TestWarmPanics(t *testing.T) {
	l := &logs{}
	opts := options(t)
	opts.Logger = slog.New(l)
	opts.Warm = func() { panic("warming failed") }
	r := run(t, opts)
	assert.False(t, mcptest.Call[lifecycle.Route](t, r.client, "route", nil).Attached)
	r.poll(t, "the panic in the log", func() bool {
		return len(l.Find(slog.LevelError, "Options.Warm panicked; NewServer does its work")) == 1
	})
	require.NoError(t, r.stop(t))
}
