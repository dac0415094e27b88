package mcpserve

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Stats counts what the HTTP transport holds and what it refused. Serve
// keeps it current while it runs; any goroutine may read it. The zero value
// is ready to use.
type Stats struct {
	sessions    atomic.Int64 // live sessions
	connections atomic.Int64 // open connections

	opened      atomic.Int64 // sessions opened, ever
	expired     atomic.Int64 // sessions closed after SessionIdleTimeout
	evicted     atomic.Int64 // idle sessions closed to make room under MaxSessions
	refused     atomic.Int64 // initializes refused with 503: every session busy
	batches     atomic.Int64 // batches refused: forbidden by the version, or too large
	connsClosed atomic.Int64 // quiet connections closed to make room under MaxConnections
}

// Sessions is the number of live HTTP sessions (initialize-era clients;
// 2026-07-28 clients hold none).
func (s *Stats) Sessions() int { return int(s.sessions.Load()) }

// Connections is the number of open HTTP connections.
func (s *Stats) Connections() int { return int(s.connections.Load()) }

// counts is a copy of the cumulative counters, for the periodic log line.
type counts struct{ opened, expired, evicted, refused, batches, connsClosed int64 }

func (s *Stats) counts() counts {
	return counts{s.opened.Load(), s.expired.Load(), s.evicted.Load(), s.refused.Load(), s.batches.Load(), s.connsClosed.Load()}
}

// logInterval is how often, at most, logStats writes its Info line.
const logInterval = time.Minute

// logStats writes one Info line every interval in which a session was
// opened, closed or refused, or a connection or batch refused: the counts
// of that interval and what is live. Per-session events are logged at
// Debug where they happen. It returns when ctx is done.
func logStats(ctx context.Context, s *Stats, log *slog.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last counts // the first line counts from the start
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := s.counts()
		if now == last {
			continue
		}
		log.Info("HTTP sessions", "interval", interval.String(),
			"opened", now.opened-last.opened, "expired", now.expired-last.expired,
			"evicted", now.evicted-last.evicted, "refused", now.refused-last.refused,
			"batches_refused", now.batches-last.batches, "connections_closed", now.connsClosed-last.connsClosed,
			"live_sessions", s.Sessions(), "open_connections", s.Connections())
		last = now
	}
}
