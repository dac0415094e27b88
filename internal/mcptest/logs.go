package mcptest

import (
	"context"
	"log/slog"
	"sync"
)

// Logs is a slog.Handler that keeps every record, at every level, for a
// test to look at: slog.New(&logs) is a logger, and Find and Records read
// what it logged. It is safe for concurrent use; the zero value is empty
// and ready.
type Logs struct {
	mu      sync.Mutex
	records []slog.Record
}

// Enabled reports true: every level is kept.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of r.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// WithAttrs returns l: the attributes are not kept.
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l: the group is not kept.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Records returns every record kept so far, oldest first.
func (l *Logs) Records() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.records...)
}

// Find returns the records at level whose message is msg.
func (l *Logs) Find(level slog.Level, msg string) []slog.Record {
	var out []slog.Record
	for _, r := range l.Records() {
		if r.Level == level && r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// Attr returns the value of r's attribute key as a string, or "".
func Attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
