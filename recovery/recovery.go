// Package recovery checks a home at start-up and repairs what a crash or a
// careless hand left behind, reporting every finding and action.
//
// Run removes orphan temporary files and stale git locks, moves a dead
// server's state file aside, rolls back interrupted checkpointed updates,
// recreates missing directories, repairs the config repository, quarantines
// config files that do not parse and restores their last good version from
// git, and commits what a crash left uncommitted. It never deletes user
// data: whatever it moves goes to backups/ byte for byte. A corrupt file
// with no good version in history is quarantined and reported as needing the
// user, not replaced with defaults unless the caller allows it. Run must be
// called while holding the home's writer lock; with DryRun it only looks.
//
// A dead server's state file is no user data, and a server that keeps
// dying would fill backups/ with them, each holding a bearer token: its
// copy in backups/ keeps every byte but the token's value, which reads
// "redacted" (the token died with its server, and the rest is the
// evidence), and only the newest five copies are kept.
package recovery

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// Finding kinds.
const (
	KindOrphanTemp     = "orphan-temp"
	KindStaleGitLock   = "stale-git-lock"
	KindStaleState     = "stale-state"
	KindInterrupted    = "interrupted-update"
	KindMissingDir     = "missing-dir"
	KindGitRepair      = "git-repair"
	KindCorruptConfig  = "corrupt-config"
	KindUncommitted    = "uncommitted-changes"
	KindNotInstalled   = "not-installed"
	KindUnreadableFile = "unreadable"
)

// Options configure Run.
type Options struct {
	Home string
	// Validate checks one config file beyond its YAML/JSON syntax; path is
	// relative to config/. A file it rejects is treated as corrupt.
	Validate func(path string, data []byte) error
	// Defaults (rooted like config/) may replace a corrupt file that has no
	// good version in history, but only when AllowDefaults is set.
	Defaults      fs.FS
	AllowDefaults bool
	// DryRun finds and reports but changes nothing.
	DryRun bool
	// Git sets the config repository's author; HoldsLock is implied.
	Git    *gitstore.Options
	Logger *slog.Logger // nil = discard
}

// Finding is one thing Run found, and what it did about it.
type Finding struct {
	Kind      string `json:"kind"`
	Path      string `json:"path"`             // relative to the home
	Action    string `json:"action"`           // what Run did, or would do with DryRun
	Detail    string `json:"detail,omitempty"` // what was wrong
	Remedy    string `json:"remedy,omitempty"` // what a person should do, if anything
	NeedsUser bool   `json:"needs_user,omitempty"`
}

// Report is everything Run found in one home.
type Report struct {
	Home     string    `json:"home"`
	DryRun   bool      `json:"dry_run,omitempty"`
	Findings []Finding `json:"findings"`
}

// Clean reports whether Run found nothing.
func (r Report) Clean() bool { return len(r.Findings) == 0 }

// NeedsUser reports whether any finding needs a person.
func (r Report) NeedsUser() bool {
	for _, f := range r.Findings {
		if f.NeedsUser {
			return true
		}
	}
	return false
}

// String renders the report as text, one line per finding.
func (r Report) String() string {
	if r.Clean() {
		return "home " + r.Home + ": clean"
	}
	var b strings.Builder
	verb := "found"
	if r.DryRun {
		verb = "found (dry run, nothing changed)"
	}
	fmt.Fprintf(&b, "home %s: %s %d:", r.Home, verb, len(r.Findings))
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "\n%s %s: %s", f.Kind, f.Path, f.Action)
		if f.Detail != "" {
			fmt.Fprintf(&b, " (%s)", f.Detail)
		}
		if f.Remedy != "" {
			fmt.Fprintf(&b, "; %s", f.Remedy)
		}
	}
	return b.String()
}

// MarshalJSON renders findings as [] rather than null when there are none.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	return json.Marshal(plain(r))
}
