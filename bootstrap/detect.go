package bootstrap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// Names in a home.
const (
	VersionFile    = ".version"
	ConfigDir      = "config"
	CheckpointsDir = "checkpoints"
	BackupsDir     = "backups"
	upgradingFile  = ".upgrading" // names the backup of an upgrade in progress
	// EtcdFile holds the home's etcd settings, for a home served by
	// several hosts with one elected writer (package lifecycle/etcdlock).
	// The user writes it, before the first start too.
	EtcdFile = "etcd.yaml"
	// TokenFile holds the bearer token of the home's HTTP transport
	// (0600), made at the first start that serves HTTP and kept, as the
	// port is, so that a client configured with the URL and the token
	// reaches every writer of the home. Removing it makes a new one at
	// the next start.
	TokenFile = "http-token"
)

// stamp is the .version file. Its compatibility rules, for a field added
// later: it is optional, omitted while it holds its default (so a server
// at the defaults writes the bytes an older mcpkeep wrote), and a stamp
// without it means what the home meant before the field existed; and a
// reader ignores fields it does not know, so that a stamp written by a
// newer mcpkeep of the same schema still reads. (mcpkeep before
// max_file_size read stamps strictly, as an interrupted install if they
// held an unknown field: that is why a new field is written only when it
// is not the default.) A change readers must not ignore is a new schema.
type stamp struct {
	Schema         int       `json:"schema"`
	ToolkitVersion string    `json:"toolkit_version"`
	InstalledAt    time.Time `json:"installed_at"`
	LastBootAt     time.Time `json:"last_boot_at"`
	Boots          int       `json:"boots"`
	// MaxFileSize is the largest config file the server that wrote the
	// boot record reads (Spec.MaxFileSize), in bytes: absent (0) for
	// atomicfile.DefaultMaxSize, -1 for no limit.
	MaxFileSize int64 `json:"max_file_size,omitempty"`
	// Server names the server whose home this is (Spec.Server): absent
	// for a stamp written before mcpkeep recorded it, or by a program
	// that gave no name; the next start that gives one records it.
	Server string `json:"server,omitempty"`
}

// recordedLimit is limit, a Spec.MaxFileSize, as the stamp records it: 0
// for the default, -1 for no limit, else the bytes.
func recordedLimit(limit int64) int64 {
	switch {
	case limit < 0:
		return -1
	case limit == atomicfile.DefaultMaxSize:
		return 0
	}
	return limit
}

// IsLayoutName reports whether name, an entry of a home's top directory,
// is one bootstrap makes or expects there: the stamp, config/,
// checkpoints/, backups/, an upgrade's journal, and what may be there
// before an install (the lock's files, state.json, the etcd settings). Other entries are not
// a home's; the harness refuses to install a home among them.
func IsLayoutName(name string) bool {
	switch name {
	case VersionFile, ConfigDir, CheckpointsDir, BackupsDir, upgradingFile:
		return true
	}
	return ignored[name]
}

// ignored are what may exist in a home before its install: the lock takes
// the home first, and keeps in backups/ the copy of a garbage PID file it
// reclaims. An install that stopped after making backups/ alone is
// finished by a fresh install just as well.
var ignored = map[string]bool{".lock": true, ".lock.flock": true, "state.json": true, BackupsDir: true, EtcdFile: true, TokenFile: true}

// Detect reads the home's state. schema is the caller's current schema
// version; 0 means "do not judge" (for operator tools that do not know the
// server's schema): a stamped home is then Ready. A stamp that does not
// parse makes the home Incomplete, with the reason in Detail; Ensure
// quarantines it and finishes the install. Errors are for homes that cannot
// be read at all.
func Detect(home string, schema int) (Info, error) {
	if err := checkHome(home); err != nil {
		return Info{}, err
	}
	entries, err := os.ReadDir(home)
	if errors.Is(err, fs.ErrNotExist) {
		return Info{State: Fresh, Detail: "home does not exist"}, nil
	}
	if err != nil {
		return Info{}, err
	}
	empty := true
	for _, e := range entries {
		if !ignored[e.Name()] {
			empty = false
		}
	}
	if empty {
		return Info{State: Fresh, Detail: "home is empty"}, nil
	}
	st, err := readStamp(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Info{State: Incomplete, Detail: "no " + VersionFile + " stamp: an install was interrupted"}, nil
	case errors.Is(err, atomicfile.ErrCorrupt):
		return Info{State: Incomplete, Detail: err.Error()}, nil
	case err != nil:
		return Info{}, unreadable(err)
	}
	info := Info{Schema: st.Schema, ToolkitVersion: st.ToolkitVersion, InstalledAt: st.InstalledAt,
		LastBootAt: st.LastBootAt, Boots: st.Boots, MaxFileSize: recordedLimit(st.MaxFileSize), Server: st.Server}
	switch _, err := os.Stat(filepath.Join(home, ConfigDir, ".git")); {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		info.State, info.Detail = Incomplete, "stamped, but "+ConfigDir+"/ is not a git repository"
		return info, nil
	case err != nil:
		// Not "not installed": a home this user cannot read is left as
		// it is, stamp and all, until its owner or modes are put right.
		return Info{}, unreadable(err)
	}
	switch {
	case schema == 0 || st.Schema == schema:
		info.State = Ready
	case st.Schema < schema:
		info.State, info.Detail = NeedsUpgrade, fmt.Sprintf("schema %d, current %d", st.Schema, schema)
	default:
		info.State, info.Detail = TooNew, fmt.Sprintf("schema %d is newer than this server's %d", st.Schema, schema)
	}
	return info, nil
}

// unreadable returns err, from reading a home's file, with what to do when
// it is a permission error: the home's files must be readable by the user
// the server runs as.
func unreadable(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("bootstrap: %w: a home's files must belong to the user the server runs as (uid %d); "+
			"give them back to it (chown -R, chmod u+rwX) or use another home", err, os.Getuid())
	}
	return err
}

// checkHome returns an error that says what to do when home is there but
// is not a directory.
func checkHome(home string) error {
	if fi, err := os.Stat(home); err == nil && !fi.IsDir() {
		return fmt.Errorf("bootstrap: home %s is not a directory: give the server a directory's path "+
			"(one that does not exist yet is created), or move the file away", home)
	}
	return nil
}

func readStamp(home string) (stamp, error) {
	var st stamp
	path := filepath.Join(home, VersionFile)
	if err := atomicfile.ReadJSON(path, &st); err != nil { // unknown fields are a newer mcpkeep's (see stamp)
		return st, err
	}
	if st.Schema < 1 {
		return st, &atomicfile.CorruptError{Path: path, Err: fmt.Errorf("schema %d: want 1 or more", st.Schema)}
	}
	return st, nil
}

func writeStamp(home string, st stamp) error {
	return atomicfile.WriteJSON(filepath.Join(home, VersionFile), st, 0o600)
}
