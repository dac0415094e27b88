// Package statefile records what a running server is (pid, start time,
// transports, URL, token) in a 0600 state file other processes can read, and
// keeps a registry of many servers in one file without losing updates.
//
// A state file is written atomically (see atomicfile), so readers need no
// lock and never see a torn file. Liveness is checked by PID and process
// start time, so a PID recycled by another process reads as dead. The package
// does not make one process the only writer of a home: that is
// lifecycle.Lock's job.
package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/proc"
)

// SchemaVersion is the version of the state file format this package writes.
// Read rejects files with a newer version.
const SchemaVersion = 1

// FileName is the state file's name inside a home.
const FileName = "state.json"

// Status values.
const (
	StatusStarting = "starting"
	StatusReady    = "ready"
	StatusStopping = "stopping"
)

// ErrUnknownVersion is matched by the error Read returns for a state file
// written by a newer, unknown schema.
var ErrUnknownVersion = errors.New("statefile: unknown schema version")

// HTTP describes a server's Streamable HTTP endpoint.
type HTTP struct {
	Host string `json:"host"` // the host of the address asked for, as given ("" means 127.0.0.1)
	Port int    `json:"port"` // the port it bound, which may differ from the port asked for
	URL  string `json:"url"`  // what clients connect to: 127.0.0.1 for loopback, never localhost
	// Sessions counts the endpoint's live HTTP sessions as of the last
	// health check (Health.CheckedAt); GET /healthz has the count live.
	// The registry's copy, made at start, has none.
	Sessions int `json:"sessions,omitempty"`
	// Connections counts its open HTTP connections, like Sessions.
	Connections int `json:"connections,omitempty"`
}

// Health is the result of the last health check.
type Health struct {
	OK        bool      `json:"ok"`                 // no problem found
	CheckedAt time.Time `json:"checked_at"`         // when the check ran, UTC
	Problems  []string  `json:"problems,omitempty"` // what failed, one line each, when not OK
}

// Remote is where a server's config repository stands with its git
// remote (lifecycle.RemoteOptions), as of its last fetch or push.
type Remote struct {
	URL    string `json:"url"`              // the remote, its password replaced: no credential is ever written here
	Mode   string `json:"mode"`             // "async" or "sync"
	Branch string `json:"branch,omitempty"` // the remote branch replicated
	Head   string `json:"head,omitempty"`   // the home's last commit
	Remote string `json:"remote,omitempty"` // the remote branch's, as last seen
	// Ahead counts the home's commits the remote lacks: how far behind
	// the remote is; OldestUnpushed is when the oldest of them was made.
	Ahead          int       `json:"ahead"`
	Behind         int       `json:"behind"`                   // the remote's commits not merged here yet
	OldestUnpushed time.Time `json:"oldest_unpushed,omitzero"` // zero when the remote lacks none
	LastFetch      time.Time `json:"last_fetch,omitzero"`      // when a fetch last worked
	LastPush       time.Time `json:"last_push,omitzero"`       // when a push last worked
	Error          string    `json:"error,omitempty"`          // why the last fetch or push failed
	Conflicts      []string  `json:"conflicts,omitempty"`      // conflicts/<time> tags to look at
}

// State is a running server's record.
type State struct {
	// Schema is the version of the file format: SchemaVersion when written.
	Schema int `json:"schema"`
	// Name is the server's name, as it gives it to MCP clients.
	Name string `json:"name"`
	// Version is the server's own version; ToolkitVersion is mcpkeep's.
	Version string `json:"version,omitempty"`
	// PID is the server's process ID.
	PID int `json:"pid"`
	// StartTime is when the process started, an opaque number that tells
	// it from a later process given the same PID (see Alive). A record
	// without one reads as dead.
	StartTime uint64 `json:"start_time"`
	// BootID is the kernel's boot ID when the record was made, "" if
	// unknown: a record from an earlier boot reads as dead.
	BootID string `json:"boot_id,omitempty"`
	// ToolkitVersion is the version of mcpkeep the server is built with.
	ToolkitVersion string `json:"toolkit_version,omitempty"`
	// Home is the home directory the server serves.
	Home string `json:"home"`
	// Cwd is the server's working directory when the record was made.
	Cwd string `json:"cwd,omitempty"`
	// Stdio reports whether the server serves MCP on stdin and stdout.
	Stdio bool `json:"stdio"`
	// HTTP is the server's Streamable HTTP endpoint, nil when it has none.
	HTTP *HTTP `json:"http,omitempty"`
	// Token is the bearer token HTTP clients must send. It is kept in the
	// 0600 state file only: the registry leaves it out.
	Token string `json:"token,omitempty"`
	// StartedAt is when the record was made, in UTC.
	StartedAt time.Time `json:"started_at"`
	// Status is StatusStarting, StatusReady or StatusStopping.
	Status string `json:"status"`
	// Health is the result of the last health check, nil before the first.
	Health *Health `json:"health,omitempty"`
	// Socket is the unix socket other processes launched on this home
	// attach to, "" when the server takes no attached clients.
	Socket string `json:"socket,omitempty"`
	// Client is the server's own client: the MCP client that launched the
	// server's process and speaks to it over the process's stdin and
	// stdout (after a handover, through the process's forwarder), nil
	// until that client has initialized, and for a server without stdio.
	// State files written before it existed have none.
	Client *Client `json:"client,omitempty"`
	// Sessions lists the client sessions attached to this server through
	// other processes, oldest first. The server's own stdio client (Client)
	// and its HTTP clients are not in it.
	Sessions []Session `json:"sessions,omitempty"`
	// Cluster is the server's place among the hosts that serve one home
	// under an elected writer (lifecycle.Options.Elector), nil when it
	// runs alone.
	Cluster *Cluster `json:"cluster,omitempty"`
	// Remote is where the config repository stands with its git remote,
	// nil when it has none.
	Remote *Remote `json:"remote,omitempty"`
}

// Roles of a server among the hosts that serve one home.
const (
	// RoleActive: the server holds the writer's lease and serves every
	// request.
	RoleActive = "active"
	// RoleStandby: another host's server is the writer, or none is
	// elected yet; MCP requests are refused with the active writer's URL.
	RoleStandby = "standby"
	// RoleReadOnly: the server was the writer and cannot renew its lease
	// (etcd does not answer), and it knows of no other writer: it serves
	// reads and refuses changes until it is the writer again or sees
	// another.
	RoleReadOnly = "readonly"
)

// Cluster describes a server that is one of several hosts' servers of one
// home, of which an elected one writes.
type Cluster struct {
	// Role is RoleActive, RoleStandby or RoleReadOnly, as of the last
	// change of role; GET /healthz has it live.
	Role string `json:"role"`
	// Active is the URL the active writer advertises ("" when none is
	// known, or the writer serves no HTTP): this server's own when it is
	// the writer.
	Active string `json:"active,omitempty"`
	// ActiveHost is the host name of the active writer's machine, "" when
	// none is known.
	ActiveHost string `json:"active_host,omitempty"`
	// Term is the fencing token of the writer's lease while this server is
	// the writer (etcd: the create revision of its election key), 0
	// otherwise.
	Term int64 `json:"term,omitempty"`
	// Since is when the server took its Role, UTC.
	Since time.Time `json:"since"`
}

// Client is the MCP client of a server's own process, which speaks to it
// over stdio.
type Client struct {
	// Name is the client's name, as it gave it in its initialize
	// request's clientInfo; "" if it gave none.
	Name string `json:"name,omitempty"`
	// Version is the client's version, given with its name.
	Version string `json:"version,omitempty"`
	// Since is when the client initialized its session, UTC: a client
	// whose process became the writer after a handover keeps the time it
	// initialized with the writer before.
	Since time.Time `json:"since"`
}

// Session is one client session attached to a server through another
// process: the process an MCP client launched, which forwards the client's
// messages to the server over its Socket.
type Session struct {
	// PID is the attached process's ID.
	PID int `json:"pid"`
	// Client is the client's name, as it gave it in its initialize
	// request or its requests' _meta; "" until it said.
	Client string `json:"client,omitempty"`
	// ClientVersion is the client's version, given with its name.
	ClientVersion string `json:"client_version,omitempty"`
	// Since is when the attached process began serving its client, UTC:
	// a session that moved to a new server after a handover keeps it.
	Since time.Time `json:"since"`
}

// New returns a State for the current process with Schema, PID, StartTime,
// BootID, Cwd, StartedAt and Status (starting) filled in. It fails when the
// process cannot read its own start time: a record without one reads as
// dead (see Alive), so it would be pruned from the registry and its state
// file taken for a stale one.
func New(name, home string) (State, error) {
	pid, start, err := proc.Self()
	if err != nil {
		return State{}, fmt.Errorf("statefile: cannot read this process's start time, without which its record reads as dead: %w", err)
	}
	cwd, _ := os.Getwd()
	return State{
		Schema:    SchemaVersion,
		Name:      name,
		PID:       pid,
		StartTime: start,
		BootID:    proc.BootID(),
		Home:      home,
		Cwd:       cwd,
		StartedAt: time.Now().UTC().Truncate(time.Millisecond),
		Status:    StatusStarting,
	}, nil
}

// Alive reports whether the process s describes is running: its PID exists
// and its start time matches, so a PID reused by another process, or one from
// an earlier boot, reads as dead, and so does a process that exited but is
// not yet reaped (a zombie). A record without a start time (0) reads as
// dead, since nothing shows it is the process running under its PID now. A
// PID of another user (EPERM) is alive.
func (s *State) Alive() bool {
	if s == nil {
		return false
	}
	if s.BootID != "" {
		if b := proc.BootID(); b != "" && b != s.BootID {
			return false
		}
	}
	return proc.Alive(s.PID, s.StartTime)
}

// Ours reports whether s describes the current process. A record without
// a start time is not ours, nor any record when this process cannot read
// its own start time.
func (s *State) Ours() bool {
	pid, start, err := proc.Self()
	return err == nil && s != nil && s.StartTime != 0 && s.PID == pid && s.StartTime == start
}

// Write atomically and durably replaces the state file at path with s, mode
// 0600 (see atomicfile.WriteFile). A symlink at path is replaced, not
// followed. A zero s.Schema is set to SchemaVersion. It refuses a State
// without a PID or a start time, which would read as dead: build it with
// New.
func Write(path string, s *State) error {
	if s == nil {
		return fmt.Errorf("statefile: write %s: nil State", path)
	}
	if err := s.checkProcess(); err != nil {
		return fmt.Errorf("statefile: write %s: %w", path, err)
	}
	if s.Schema == 0 {
		s.Schema = SchemaVersion
	}
	return atomicfile.WriteJSON(path, s, 0o600)
}

// checkProcess returns an error when s cannot describe a live process:
// it has no PID or no start time.
func (s *State) checkProcess() error {
	if s.PID <= 0 || s.StartTime == 0 {
		return fmt.Errorf("pid %d, start time %d: a record needs both, or it reads as dead (build it with New)", s.PID, s.StartTime)
	}
	return nil
}

// Read reads the state file at path. A missing file gives an error matching
// fs.ErrNotExist; one this user may not read (the file is 0600) an error
// matching fs.ErrPermission that says so; a torn or garbage file a
// *atomicfile.CorruptError; a file of a newer schema an error matching
// ErrUnknownVersion.
func Read(path string) (*State, error) {
	var s State
	if err := atomicfile.ReadJSON(path, &s); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("statefile: cannot read the state file as uid %d (run as the user the server "+
				"runs as: the file is 0600 because it holds the bearer token): %w", os.Getuid(), err)
		}
		return nil, withRemedy(err, stateRemedy)
	}
	return &s, check(path, &s)
}

// stateRemedy is what to do about a corrupt state file: nothing by hand,
// since recovery moves a state file it cannot read to backups/.
const stateRemedy = "the next start of a server in its home moves it to backups/, " +
	"as does `mcpkeep doctor --fix` while none runs there"

func check(path string, s *State) error {
	switch {
	case s.Schema > SchemaVersion:
		return fmt.Errorf("%s: schema %d is newer than this toolkit's %d (upgrade mcpkeep): %w", path, s.Schema, SchemaVersion, ErrUnknownVersion)
	case s.Schema < 1 || s.PID <= 0:
		return &atomicfile.CorruptError{Path: path, Err: fmt.Errorf("schema %d, pid %d: not a state file", s.Schema, s.PID),
			Remedy: stateRemedy}
	}
	return nil
}

// withRemedy returns err, or, when it is a *atomicfile.CorruptError, a copy
// that gives remedy as what a person should do about the file.
func withRemedy(err error, remedy string) error {
	if ce, ok := err.(*atomicfile.CorruptError); ok {
		c := *ce
		c.Remedy = remedy
		return &c
	}
	return err
}

// Remove removes the state file at path only if it describes the current
// process (PID and start time match). It returns nil, leaving the file in
// place, when the file belongs to another process or cannot be read or
// parsed (recovery deals with those), and nil when it is missing. The
// check and the removal are two steps: callers hold the home's lock
// (lifecycle.Lock) so no other server rewrites the file in between.
func Remove(path string) error {
	s, err := Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || !s.Ours() {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
