package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// notes is the logger handler of the library calls a command makes: it
// keeps their warnings (a reclaimed stale lock, a repaired repository) as
// lines for the command's own output, text or JSON. mcpkeep prints no log
// lines: its stderr is one line, and only for an error.
type notes struct {
	mu    sync.Mutex
	lines []string
}

func (n *notes) logger() *slog.Logger { return slog.New(n) }

// Enabled keeps warnings and errors; what a library did as a matter of
// course (Info) is not worth a line.
func (n *notes) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

// Handle keeps the message and the values of its attributes, but for the
// home and repository paths the command's output already names.
func (n *notes) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key != "home" && a.Key != "repo" {
			fmt.Fprintf(&b, ": %v", a.Value)
		}
		return true
	})
	n.add(b.String())
	return nil
}

// WithAttrs drops attrs: see Handle.
func (n *notes) WithAttrs([]slog.Attr) slog.Handler { return n }

// WithGroup ignores the group.
func (n *notes) WithGroup(string) slog.Handler { return n }

// add keeps line, flattened to one line.
func (n *notes) add(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lines = append(n.lines, flat(line))
}

// list returns the lines kept so far.
func (n *notes) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.lines...)
}

// text renders the lines, one "note: …" line each.
func (n *notes) text() string {
	var b strings.Builder
	for _, l := range n.list() {
		fmt.Fprintf(&b, "note: %s\n", l)
	}
	return b.String()
}
