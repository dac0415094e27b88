// Package recovery checks a home at start-up and repairs what a crash or a
// careless hand left behind, reporting every finding and action.
//
// Run removes orphan temporary files and stale git locks, moves a dead
// server's state file aside, rolls back interrupted checkpointed updates,
// recreates missing directories, repairs the config repository, quarantines
// config files that do not parse and restores their last good version from
// git, and commits what a crash left uncommitted.
//
// A config file is read only as a regular file of at most MaxFileSize
// bytes: a symbolic link (to a file outside the home or inside it), a named
// pipe, a socket, a device or a directory where a config file belongs
// (named *.yaml, *.yml or *.json) is never followed or opened, and is
// quarantined like a corrupt file; a link is moved as a link, its target
// left alone. It never deletes user
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

// Finding kinds: the values of Finding.Kind.
const (
	KindOrphanTemp     = "orphan-temp"         // a temporary file of an interrupted atomic write: removed
	KindStaleGitLock   = "stale-git-lock"      // a *.lock in config/.git no git writer holds: removed
	KindStaleState     = "stale-state"         // the state file of a dead server, or one that does not parse: moved to backups/
	KindInterrupted    = "interrupted-update"  // a checkpoint an update never closed: rolled back
	KindMissingDir     = "missing-dir"         // checkpoints/ or backups/ gone: created
	KindGitRepair      = "git-repair"          // what gitstore.Open repaired in config/.git, or could not open
	KindCorruptConfig  = "corrupt-config"      // a config file that does not parse or validate: quarantined, restored if it can be
	KindUncommitted    = "uncommitted-changes" // config/ differs from its last commit: committed
	KindNotInstalled   = "not-installed"       // no config repository: Run checks nothing else
	KindUnreadableFile = "unreadable"          // a config file Run cannot read: left for the user
	KindRefusedFile    = "refused-file"        // a link, pipe, socket, device or directory where a config file belongs, or a file over MaxFileSize: quarantined, restored if it can be
	KindMergeConflict  = "merge-conflict"      // a merge from the git remote kept one version of a file both changed, the other in a tag (or refused the remote's entry): left for the user
)

// Options configure Run.
type Options struct {
	Home string // the home to check; required
	// Validate checks one config file beyond its YAML/JSON syntax; path is
	// relative to config/. A file it rejects is treated as corrupt.
	Validate func(path string, data []byte) error
	// Defaults (rooted like config/) may replace a corrupt file that has no
	// good version in history, but only when AllowDefaults is set; without
	// it such a file is quarantined and the finding needs the user.
	Defaults      fs.FS
	AllowDefaults bool // let Defaults replace a corrupt file with no good version
	// MaxFileSize is the largest config file Run reads, in bytes: 0 means
	// atomicfile.DefaultMaxSize, a negative value no limit. A larger file
	// is quarantined like a corrupt one, and so is a history version of it
	// larger than this: it is not a good version to restore.
	MaxFileSize int64
	// DryRun finds and reports but changes nothing.
	DryRun bool
	// Git sets the config repository's author; HoldsLock is implied.
	Git    *gitstore.Options
	Logger *slog.Logger // nil = discard
}

// Finding is one thing Run found, and what it did about it.
type Finding struct {
	Kind      string `json:"kind"`                 // one of the Kind constants
	Path      string `json:"path"`                 // relative to the home, slash-separated; absolute for a file outside it
	Action    string `json:"action"`               // what Run did, or would do with DryRun; "none" if nothing
	Detail    string `json:"detail,omitempty"`     // what was wrong
	Remedy    string `json:"remedy,omitempty"`     // what a person should do, if anything
	NeedsUser bool   `json:"needs_user,omitempty"` // Run could not fix it: a person must (see Remedy)
}

// Report is everything Run found in one home.
type Report struct {
	Home     string    `json:"home"`              // the home's absolute path
	DryRun   bool      `json:"dry_run,omitempty"` // Run only looked: the actions say what it would do
	Findings []Finding `json:"findings"`          // in the order Run found them
	// Notes say what a dry run cannot tell ahead, one sentence each, such
	// as a repair that only opening the repository to write finds. Run
	// leaves it empty; a caller that knows more of the home may add them.
	Notes []string `json:"notes,omitempty"`
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

// String renders the report as text, one line per finding, then one
// "note: " line per note.
func (r Report) String() string {
	var notes strings.Builder
	for _, n := range r.Notes {
		notes.WriteString("\nnote: " + n)
	}
	if r.Clean() {
		return "home " + r.Home + ": clean" + notes.String()
	}
	var b strings.Builder
	verb := "found"
	if r.DryRun {
		verb = "found (dry run, nothing changed)"
	}
	fmt.Fprintf(&b, "home %s: %s %d:", r.Home, verb, len(r.Findings))
	for _, f := range r.Findings {
		b.WriteString("\n" + f.String())
	}
	return b.String() + notes.String()
}

// String renders the finding as one line of Report.String: its kind,
// path and action, then its detail in parentheses and its remedy.
func (f Finding) String() string {
	s := f.Kind + " " + f.Path + ": " + f.Action
	if f.Detail != "" {
		s += " (" + f.Detail + ")"
	}
	if f.Remedy != "" {
		s += "; " + f.Remedy
	}
	return s
}

// MarshalJSON renders findings as [] rather than null when there are none.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	return json.Marshal(plain(r))
}
