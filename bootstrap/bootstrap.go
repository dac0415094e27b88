// Package bootstrap tells a first install from a restart from an upgrade,
// and brings a home to the current schema in a way a crash cannot break.
//
// A fresh install creates the home layout (0700 directories), writes the
// default files without clobbering any file a user put there, initializes
// the config git repository with one initial commit, and writes the .version
// stamp last, so a home without a stamp is an interrupted install that the
// next Ensure finishes. An upgrade backs up config/, runs the migrations in
// order, validates, commits and stamps; a failing migration puts config/
// back exactly as it was. backups/ keeps the copy of config/ taken before
// each upgrade that succeeded; for one that failed, config/ holds that
// copy's bytes again, so only the config/ the migrations left is kept, the
// newest per pair of schemas, however many times a server retries. A home
// stamped by a newer schema is never downgraded. Ensure must be called while holding the home's writer lock
// (lifecycle.Lock); bootstrap does not lock.
package bootstrap

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpkeep/mcpkeep/internal/buildinfo"
)

// State is what Detect finds in a home.
type State int

// States of a home.
const (
	Fresh        State = iota // no home, or an empty one
	Ready                     // stamped with the current schema
	NeedsUpgrade              // stamped with an older schema
	Incomplete                // content but no (readable) stamp, or no config repository: an interrupted install
	TooNew                    // stamped with a newer schema than this program knows
)

// String returns fresh, ready, needs-upgrade, incomplete or too-new.
func (s State) String() string {
	switch s {
	case Fresh:
		return "fresh"
	case Ready:
		return "ready"
	case NeedsUpgrade:
		return "needs-upgrade"
	case Incomplete:
		return "incomplete"
	case TooNew:
		return "too-new"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Errors callers branch on.
var (
	// ErrTooNew: the home was stamped by a newer schema. Upgrade the server;
	// never downgrade a home.
	ErrTooNew = errors.New("bootstrap: home schema is newer than this server")
	// ErrMigration is matched by every *MigrationError.
	ErrMigration = errors.New("bootstrap: migration failed")
	// ErrOtherServer is matched by every *OtherServerError.
	ErrOtherServer = errors.New("bootstrap: the home is another server's")
)

// OtherServerError reports a home whose stamp names another server than
// Spec.Server: its files are that server's, which this one would read,
// change and migrate as its own. Ensure refuses it before touching the
// home.
type OtherServerError struct {
	Home    string // the home
	Stamped string // the server its stamp names (or, with the stamp lost, its install commit)
	Server  string // Spec.Server: the server that asked

	byHistory bool // the stamp was lost; config/'s install commit names Stamped
}

// Error names both servers, what says so, and what to do.
func (e *OtherServerError) Error() string {
	says := "its " + VersionFile + " says so"
	if e.byHistory {
		says = "its " + VersionFile + " is missing or does not read, and the install commit of its " + ConfigDir + "/ history says so"
	}
	return fmt.Sprintf("bootstrap: %s is the home of server %q (%s), not of %q: "+
		"give %q a home of its own", e.Home, e.Stamped, says, e.Server, e.Server)
}

// Unwrap returns ErrOtherServer.
func (e *OtherServerError) Unwrap() error { return ErrOtherServer }

// MigrationError reports a migration (or the validation after it) that
// failed. config/ was restored to what it was before the upgrade.
type MigrationError struct {
	Migration string // the migration's name, or "validate"
	From, To  int    // the migration's schemas, or the whole upgrade's
	Err       error  // what the migration or Spec.Validate returned
}

// Error names the migration and its schemas.
func (e *MigrationError) Error() string {
	return fmt.Sprintf("bootstrap: migration %q (v%d→v%d) failed, config restored as it was: %v", e.Migration, e.From, e.To, e.Err)
}

// Unwrap returns ErrMigration and the migration's error.
func (e *MigrationError) Unwrap() []error { return []error{ErrMigration, e.Err} }

// Info is what Detect reads from a home's stamp.
type Info struct {
	State          State     `json:"state"`                     // what the home is: Fresh, Ready, …
	Schema         int       `json:"schema,omitempty"`          // the schema of the home's config, as stamped
	ToolkitVersion string    `json:"toolkit_version,omitempty"` // the mcpkeep version that last stamped it
	InstalledAt    time.Time `json:"installed_at,omitzero"`     // when the install finished
	LastBootAt     time.Time `json:"last_boot_at,omitzero"`     // the last start Ensure counted
	Boots          int       `json:"boots,omitempty"`           // the starts Ensure counted, the install's included
	Detail         string    `json:"detail,omitempty"`          // why the home is Incomplete, TooNew, …
	// MaxFileSize is the largest config file, in bytes, that the server
	// whose start wrote the boot record reads (its Spec.MaxFileSize):
	// 0 for atomicfile.DefaultMaxSize, also for a stamp that records none
	// (one written before mcpkeep recorded it), a negative value for no
	// limit. Tools that read the home's config files with a size limit
	// (mcpkeep doctor, history, rollback, sync) use it, so that they refuse
	// what the server refuses and nothing else.
	MaxFileSize int64 `json:"max_file_size,omitempty"`
	// Server is the name of the server whose home this is, as its
	// starts record it (Spec.Server); "" when none was recorded.
	Server string `json:"server,omitempty"`
}

// ToolkitVersion says which mcpkeep this binary holds, as the main module or
// a dependency: the version a release build stamped in, with its commit
// ("v1.2.3 (commit 1a2b3c4d5e6f)"), a module version, or for anything that
// is not a release, where it came from in words: "devel (local directory
// ../mcpkeep, by a replace directive in go.mod)", "v0.0.0-2026…-29135dbe3994
// (commit 29135dbe3994 of 2026-11-24, not a release)", or "devel (a local
// build, no commit recorded)" when the build recorded nothing.
func ToolkitVersion() string { return buildinfo.Read().String() }
