package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/proc"
)

// RegistryEnv overrides the registry path; set to "" it disables the
// registry.
const RegistryEnv = "MCPKEEP_REGISTRY"

// ErrNoRegistry is returned by Register and Unregister on a Registry whose
// path is empty, the value DefaultRegistryPath uses for "disabled".
var ErrNoRegistry = errors.New("statefile: registry disabled (empty path)")

// DefaultRegistryPath returns the registry file to use: $MCPKEEP_REGISTRY
// when set, else $XDG_STATE_HOME/mcpkeep/servers.json, else
// ~/.local/state/mcpkeep/servers.json. It returns "" when the registry is
// disabled ($MCPKEEP_REGISTRY set to the empty string) or when no home
// directory is known; callers skip registration when it returns "".
func DefaultRegistryPath() string {
	if p, ok := os.LookupEnv(RegistryEnv); ok {
		return p
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mcpkeep", "servers.json")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "mcpkeep", "servers.json")
	}
	return ""
}

// URL returns the Streamable HTTP URL of a server on host:port. Loopback
// hosts are written as the literal 127.0.0.1 (or [::1] for a server bound
// to ::1 only), never localhost, which may resolve to ::1 while the server
// listens on 127.0.0.1. A wildcard host (0.0.0.0, ::) is reached through
// 127.0.0.1 too.
func URL(host string, port int) string {
	switch {
	case host == "" || strings.EqualFold(host, "localhost"):
		host = "127.0.0.1"
	case host == "0.0.0.0" || host == "::":
		host = "127.0.0.1" // bound everywhere; loopback reaches it
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/mcp"
}

// Entry is one server in the registry.
type Entry struct {
	ID           string    `json:"id"`            // the id given to Register, by convention the server's home
	State        State     `json:"state"`         // the server's record, without its Token
	RegisteredAt time.Time `json:"registered_at"` // when it last registered, UTC
	// Sessions is the number of client sessions attached to the server
	// through other processes (len of its State.Sessions, which the
	// registry leaves out: it is in the state file). The server's own
	// client does not count: State.Client, kept in the entry, says
	// whether it has one.
	Sessions int `json:"sessions"`
}

// registryFile is the registry's on-disk form.
type registryFile struct {
	Schema  int     `json:"schema"`
	Servers []Entry `json:"servers"`
}

// storedFile is registryFile as read: each entry is decoded on its own,
// so that one that is not an entry is dropped alone.
type storedFile struct {
	Schema  int               `json:"schema"`
	Servers []json.RawMessage `json:"servers"`
}

// invalidEntry is an entry of the registry file that is not a valid one.
type invalidEntry struct {
	index   int    // its place in the file, from 0
	id      string // its id, "" if it has none
	problem string // what is wrong with it
}

// problem says what makes e an invalid entry, or returns "" for a valid
// one. An invalid entry cannot be shown to be a live server: without a
// pid or a start time there is no process to check, and a server's home
// is an absolute path (lifecycle makes it one), so any other home is not
// one a server wrote.
func (e *Entry) problem() string {
	if e.ID == "" {
		return "no id"
	}
	if err := e.State.checkProcess(); err != nil {
		if e.State.PID <= 0 {
			return fmt.Sprintf("pid %d is not a process id", e.State.PID)
		}
		return fmt.Sprintf("no process start time, so no proof that pid %d is the server that registered", e.State.PID)
	}
	return homeProblem(e.State.Home)
}

// homeProblem says why home is not a server's home, or returns "".
func homeProblem(home string) string {
	if !filepath.IsAbs(home) || strings.ContainsRune(home, 0) {
		return fmt.Sprintf("home %q is not an absolute path", home)
	}
	return ""
}

// Registry is a file listing the servers running on this machine, so tools
// can discover them. Many processes may register in one file at once:
// every read-modify-write holds an exclusive flock on the sidecar
// <file>.lock for the whole transaction and replaces the file atomically,
// so no update is lost and readers, which take no lock, never see a torn
// file. Entries of dead processes (see State.Alive), and invalid entries
// (below), are pruned on every write and hidden on every read. A Registry holds no open files and may be used from many
// goroutines; the zero value is a disabled registry, use NewRegistry.
//
// An entry of a registry file that parses may still be invalid: not an
// object of the entry's form, or without an id, without a pid (or with one
// below 1), without a start time, or with a home that is not an absolute
// path. Such an entry cannot be proven to be a live server, so it is
// treated as a dead one, but with a WARN through Logger naming the
// registry file and the problem: List leaves it out, the next write drops
// it, and the other entries are kept (the file is not corrupt, and is not
// moved aside). Register refuses to write one.
//
// An update killed mid-way leaves the old file or the new one, never a
// torn one; the temporary file of one killed before its rename is removed
// by the next update, under the lock.
//
// A corrupt registry file does not stop registration: a writer renames it
// to <file>.corrupt-<UTC time> (nothing is deleted) and starts an empty
// registry, reporting the move through Logger. Readers (List) return the
// *atomicfile.CorruptError instead. The registry only holds discovery
// data, which live servers re-register when they next start.
//
// A registry this user may not read (or lock, or whose directory it may
// not search) is not taken for a missing or empty one: every method
// returns an error matching fs.ErrPermission that says what to do, and
// nothing is moved aside or replaced.
type Registry struct {
	// Logger is told when a corrupt registry file is quarantined, when
	// an invalid entry is ignored or dropped, and when the temporary file
	// of a killed update is removed; nil discards. Set it before the
	// Registry is shared.
	Logger *slog.Logger

	path string
}

// NewRegistry returns the registry stored at path. It does no I/O.
func NewRegistry(path string) *Registry { return &Registry{path: path} }

// Path returns the registry file's path.
func (r *Registry) Path() string { return r.path }

// Register adds or replaces the entry id (by convention the server's home)
// with s, leaving out s.Token (tokens stay in the 0600 state file) and
// s.Sessions, of which the entry keeps the number. It
// blocks, without a timeout, while another process or goroutine updates the
// registry. An update holds the lock only for one read and one durable
// replace (about a millisecond), and a process killed while holding it
// releases it (the kernel drops the flock), so the wait is short unless a
// holder is stopped (SIGSTOP) mid-update. It refuses a State without a PID
// or a start time, which would read as dead (build it with New), and one
// whose Home is not an absolute path.
func (r *Registry) Register(id string, s State) error {
	if id == "" {
		return errors.New("statefile: registry entry id is empty")
	}
	if err := s.checkProcess(); err != nil {
		return fmt.Errorf("statefile: register %s: %w", id, err)
	}
	if p := homeProblem(s.Home); p != "" {
		return fmt.Errorf("statefile: register %s: %s (give New the server's home as an absolute path)", id, p)
	}
	s.Token = "" // the registry is for discovery; tokens stay in the 0600 state file
	sessions := len(s.Sessions)
	s.Sessions = nil
	return r.update(func(entries []Entry) []Entry {
		entries = slices.DeleteFunc(entries, func(e Entry) bool { return e.ID == id })
		return append(entries, Entry{ID: id, State: s, RegisteredAt: time.Now().UTC().Truncate(time.Millisecond), Sessions: sessions})
	})
}

// Unregister removes the entry id, if the current process registered it.
// Another process's entry under the same id is left alone.
// Like Register, it blocks while another update runs.
func (r *Registry) Unregister(id string) error {
	pid, start, err := proc.Self()
	if err != nil {
		return fmt.Errorf("statefile: unregister %s: read this process's start time: %w", id, err)
	}
	return r.update(func(entries []Entry) []Entry {
		return slices.DeleteFunc(entries, func(e Entry) bool {
			return e.ID == id && e.State.PID == pid && e.State.StartTime == start
		})
	})
}

// List returns the registered servers that are alive, sorted by ID, without
// locking. A missing file (or a disabled registry) is an empty list; a
// file this user may not read, or in a directory it may not search, gives
// an error matching fs.ErrPermission, never an empty list; a corrupt file
// gives a *atomicfile.CorruptError, a newer one an error matching
// ErrUnknownVersion. An invalid entry is left out, with a WARN through
// Logger (see Registry).
func (r *Registry) List() ([]Entry, error) {
	entries, invalid, err := r.read()
	if err != nil {
		return nil, withRemedy(err, "the next server to start or stop moves it aside (to "+
			filepath.Base(r.path)+".corrupt-<UTC time>) and starts an empty registry")
	}
	r.warn("registry: ignoring an invalid entry; the next server to start or stop drops it", invalid)
	return slices.DeleteFunc(entries, func(e Entry) bool { return !e.State.Alive() }), nil
}

// read returns the valid entries of the registry file and what is wrong
// with the invalid ones.
func (r *Registry) read() ([]Entry, []invalidEntry, error) {
	if r.path == "" {
		return nil, nil, nil
	}
	var f storedFile
	err := atomicfile.ReadJSON(r.path, &f)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, denied("read the registry", err)
	}
	if f.Schema > SchemaVersion {
		return nil, nil, fmt.Errorf("%s: registry schema %d is newer than this toolkit's %d (upgrade mcpkeep): %w",
			r.path, f.Schema, SchemaVersion, ErrUnknownVersion)
	}
	var entries []Entry
	var invalid []invalidEntry
	for i, raw := range f.Servers {
		var e Entry
		problem := ""
		if err := json.Unmarshal(raw, &e); err != nil {
			problem = "not an entry: " + err.Error()
		} else {
			problem = e.problem()
		}
		if problem != "" {
			invalid = append(invalid, invalidEntry{index: i, id: e.ID, problem: problem})
			continue
		}
		entries = append(entries, e)
	}
	return entries, invalid, nil
}

// warn logs msg for each invalid entry.
func (r *Registry) warn(msg string, invalid []invalidEntry) {
	if r.Logger == nil {
		return
	}
	for _, e := range invalid {
		r.Logger.Warn(msg, "path", r.path, "entry", e.index, "id", e.id, "problem", e.problem)
	}
}

// update runs change on the live entries under the registry lock and
// writes the result. A corrupt registry is quarantined and replaced.
func (r *Registry) update(change func([]Entry) []Entry) error {
	if r.path == "" {
		return ErrNoRegistry
	}
	if err := atomicfile.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return denied("create the directory of registry "+r.path, err)
	}
	lock := flock.New(r.path + ".lock")
	if err := lock.Lock(); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return denied("lock the registry", err)
		}
		return fmt.Errorf("statefile: lock registry %s.lock: %w", r.path, err)
	}
	defer lock.Unlock()
	r.cleanTemps()
	entries, invalid, err := r.read()
	if errors.Is(err, atomicfile.ErrCorrupt) {
		if err := r.quarantine(err); err != nil {
			return err
		}
		entries = nil
	} else if err != nil {
		return err
	}
	if err := failpoint.Hit("statefile.registry-locked"); err != nil {
		return err
	}
	r.warn("registry: dropped an invalid entry", invalid)
	entries = slices.DeleteFunc(entries, func(e Entry) bool { return !e.State.Alive() })
	entries = change(entries)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	if entries == nil {
		entries = []Entry{}
	}
	return atomicfile.WriteJSON(r.path, registryFile{Schema: SchemaVersion, Servers: entries}, 0o600)
}

// denied returns err, the failure to do what ("read the registry"), with
// what to do about it when it is a permission error, and any other error
// as it is. A registry this user may not read is neither a missing one nor an
// empty one: reading it as either would hide its servers from List, and
// let a writer replace their entries with its own.
func denied(what string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return fmt.Errorf("statefile: cannot %s as uid %d (run as the user who owns it, "+
		"or give this user read and write access to it and its directory): %w", what, os.Getuid(), err)
}

// cleanTemps removes the temporary files of updates that were killed
// before their rename, which would otherwise pile up beside the registry:
// no start or recovery pass looks in its directory. The caller holds the
// lock, so no update is in flight. A file it cannot remove is logged, not
// returned: it does no harm to the registry.
func (r *Registry) cleanTemps() {
	removed, err := atomicfile.CleanTempsOf(r.path)
	if r.Logger == nil {
		return
	}
	for _, p := range removed {
		r.Logger.Info("registry: removed the temporary file of an update that was killed", "path", p)
	}
	if err != nil {
		r.Logger.Warn("registry: could not remove the temporary file of an update that was killed", "err", err)
	}
}

// quarantine moves the corrupt registry file aside, keeping its bytes for a
// human, and logs where it went. The caller holds the lock.
func (r *Registry) quarantine(cause error) error {
	aside := r.path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(r.path, aside); err != nil {
		return fmt.Errorf("statefile: move corrupt registry aside (remove %s by hand to start afresh): %w", r.path, errors.Join(cause, err))
	}
	if r.Logger != nil {
		problem := cause.Error()
		var ce *atomicfile.CorruptError
		if errors.As(cause, &ce) {
			problem = ce.Problem() // its remedy is what this does
		}
		r.Logger.Warn("registry: corrupt file moved aside; starting an empty registry (live servers re-register on their next start)",
			"path", r.path, "moved_to", aside, "err", problem)
	}
	return nil
}
