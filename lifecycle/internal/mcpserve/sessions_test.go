package mcpserve

import (
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionIdleTimer: a request costs the session table no timer
// operation, and a session still expires exactly when it has been idle
// for the timeout: not while it is used more often than that, nor while
// it is busy (an event stream) for longer, and not a moment early after.
func TestSessionIdleTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var closed []string
		closedNow := func() []string {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), closed...)
		}
		tab := newSessionTable(Limits{SessionIdleTimeout: time.Minute}, nil, func(id string) {
			mu.Lock()
			closed = append(closed, id)
			mu.Unlock()
		}, new(Stats), slog.New(slog.DiscardHandler))
		defer tab.close()
		require.True(t, tab.reserve())
		tab.add("a", "2025-11-25")

		for range 6 { // used every 50 s: never idle for a minute
			time.Sleep(50 * time.Second)
			s := tab.acquire("a")
			require.NotNil(t, s)
			tab.release(s)
		}
		assert.Empty(t, closedNow(), "used more often than the timeout")

		s := tab.acquire("a") // busy for three timeouts
		time.Sleep(3 * time.Minute)
		assert.Empty(t, closedNow(), "busy")
		tab.release(s)

		time.Sleep(time.Minute - time.Second)
		assert.Empty(t, closedNow(), "idle for less than the timeout")
		time.Sleep(2 * time.Second)
		assert.Equal(t, []string{"a"}, closedNow(), "idle for the timeout")
		assert.Nil(t, tab.acquire("a"))
	})
}
