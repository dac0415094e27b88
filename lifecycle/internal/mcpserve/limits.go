package mcpserve

import "time"

// Defaults for the Limits fields left zero. lifecycle.HTTPLimits documents
// each one for users; the README lists them.
const (
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultMaxSessions        = 1000
	DefaultReadHeaderTimeout  = 5 * time.Second
	DefaultIdleTimeout        = 60 * time.Second
	DefaultBodyReadTimeout    = 30 * time.Second
	DefaultMaxConnections     = 512
	DefaultMaxBodyBytes       = 4 << 20
	DefaultMaxBatch           = 100
	DefaultMaxBatchReplyBytes = 4 << 20
)

// Limits bound what HTTP clients can hold. Its fields are the fields of
// lifecycle.HTTPLimits, in the same order, so that one converts to the
// other; the documentation is there. A zero field takes its default; a
// negative one switches the limit off.
type Limits struct {
	SessionIdleTimeout time.Duration // close a session idle this long
	MaxSessions        int           // most live sessions
	ReadHeaderTimeout  time.Duration // time to send a request's headers
	IdleTimeout        time.Duration // close a keep-alive connection idle this long
	BodyReadTimeout    time.Duration // time to send a POST body
	MaxConnections     int           // most open connections
	MaxBodyBytes       int64         // largest POST body
	MaxBatch           int           // most messages in a batch
	MaxBatchReplyBytes int64         // largest answer to a batch
}

// withDefaults returns l with its zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.SessionIdleTimeout, DefaultSessionIdleTimeout)
	defInt(&l.MaxSessions, DefaultMaxSessions)
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.BodyReadTimeout, DefaultBodyReadTimeout)
	defInt(&l.MaxConnections, DefaultMaxConnections)
	def64(&l.MaxBodyBytes, DefaultMaxBodyBytes)
	defInt(&l.MaxBatch, DefaultMaxBatch)
	def64(&l.MaxBatchReplyBytes, DefaultMaxBatchReplyBytes)
	return l
}

// Mode says which kinds of HTTP client the endpoint serves. The go-sdk
// serves the 2026-07-28 protocol only without sessions and server-to-client
// requests only with them; ModeBoth routes each request to the kind that
// can serve it.
type Mode int

// The modes; see lifecycle.HTTPMode.
const (
	ModeBoth Mode = iota
	ModeSessions
	ModeStateless
)
