package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

type lockOut struct {
	PID   int  `json:"pid"`
	Alive bool `json:"alive"`
	// Stopped reports that the live holder is stopped (SIGSTOP, Ctrl-Z,
	// a debugger): it holds the home and serves no one. Linux only.
	Stopped bool `json:"stopped,omitempty"`
}

type serverOut struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	PID     int    `json:"pid"`
	// Alive reports whether the server runs. A state file whose server
	// is not running is stale: what it recorded as the server ran is in
	// Stale, none of it in the fields of recordOut.
	Alive bool `json:"alive"`
	// Stopped reports that the running server is stopped (SIGSTOP,
	// Ctrl-Z, a debugger): it answers no client of the home, and no
	// other process takes over, until it is continued. Linux only.
	Stopped   bool      `json:"stopped,omitempty"`
	Status    string    `json:"status"`
	Stdio     bool      `json:"stdio"`
	URL       string    `json:"url,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Home      string    `json:"home,omitempty"`
	Socket    string    `json:"socket,omitempty"` // where launches on the home attach
	recordOut
	// Stale is what the state file of a server that is not running last
	// recorded (the server died without cleaning up): its last health
	// check, clients, counts and role, none of them live. Absent for a
	// running server.
	Stale *recordOut `json:"stale,omitempty"`
}

// recordOut is what a server records of itself as it runs, in its state
// file: live for a running server, the last record for a dead one.
type recordOut struct {
	// HTTPSessions and HTTPConnections are the HTTP endpoint's live
	// sessions and open connections as of the last health check
	// (Health.CheckedAt), up to a health interval old; /healthz has
	// them live.
	HTTPSessions    *int              `json:"http_sessions,omitempty"`
	HTTPConnections *int              `json:"http_connections,omitempty"`
	Health          *statefile.Health `json:"health,omitempty"`
	// Client is the server's own client, on its stdio: absent until it
	// has initialized, and for a server without stdio or one of a build
	// that does not record it.
	Client   *clientOut   `json:"client,omitempty"`
	Attached int          `json:"attached"`           // the number of attached sessions
	Sessions []sessionOut `json:"sessions,omitempty"` // status only: the attached sessions
	// Cluster is the server's role among the hosts that serve its home
	// under one elected writer (etcd), as of its last change; absent for a
	// server that runs alone.
	Cluster *statefile.Cluster `json:"cluster,omitempty"`
}

// clientOut is the server's own client, which speaks to it over stdio.
type clientOut struct {
	Name    string    `json:"name,omitempty"`
	Version string    `json:"version,omitempty"`
	Since   time.Time `json:"since"` // when it initialized
}

// sessionOut is a client session attached to the server (the writer)
// through another process.
type sessionOut struct {
	PID           int       `json:"pid"`
	Client        string    `json:"client,omitempty"`
	ClientVersion string    `json:"client_version,omitempty"`
	Since         time.Time `json:"since"`
}

type configOut struct {
	Head  string `json:"head"`
	Dirty bool   `json:"dirty"`
}

// stateUnknown is statusOut.State for a home whose stamp, or the home
// itself, cannot be read: a problem says why.
const stateUnknown = "unknown"

type statusOut struct {
	Home      string `json:"home"`
	Installed bool   `json:"installed"`
	// State is bootstrap's state of the home (fresh, ready, incomplete,
	// ...), or "unknown" when its stamp or the home cannot be read.
	State          string     `json:"state"`
	Detail         string     `json:"detail,omitempty"` // why the home is not installed
	Schema         int        `json:"schema,omitempty"`
	ToolkitVersion string     `json:"toolkit_version,omitempty"`
	InstalledAt    time.Time  `json:"installed_at,omitzero"`
	LastBootAt     time.Time  `json:"last_boot_at,omitzero"`
	Boots          int        `json:"boots,omitempty"`
	MaxFileSize    int64      `json:"max_file_size,omitempty"` // bootstrap.Info.MaxFileSize: absent for the default, negative for none
	Lock           *lockOut   `json:"lock,omitempty"`
	Server         *serverOut `json:"server,omitempty"`
	Config         *configOut `json:"config,omitempty"`
	// Remote is where the config stands with its git remote: as the
	// running server last reported it, or, with none running, as of the
	// last fetch or push (no network is used).
	Remote   *gitstore.RemoteStatus `json:"remote,omitempty"`
	Problems []string               `json:"problems,omitempty"`
}

// toServer converts a state file for output: what it records of the
// server as it runs is live for a running server, and Stale for a dead one.
func toServer(s *statefile.State) *serverOut {
	out := &serverOut{Name: s.Name, Version: s.Version, PID: s.PID, Alive: s.Alive(), Status: s.Status,
		Stdio: s.Stdio, StartedAt: s.StartedAt, Home: s.Home, Socket: s.Socket}
	rec := recordOut{Health: s.Health, Attached: len(s.Sessions), Cluster: s.Cluster}
	if s.HTTP != nil {
		out.URL = s.HTTP.URL
		rec.HTTPSessions, rec.HTTPConnections = &s.HTTP.Sessions, &s.HTTP.Connections
	}
	if c := s.Client; c != nil {
		rec.Client = &clientOut{Name: c.Name, Version: c.Version, Since: c.Since}
	}
	for _, a := range s.Sessions {
		rec.Sessions = append(rec.Sessions, sessionOut{PID: a.PID, Client: a.Client, ClientVersion: a.ClientVersion, Since: a.Since})
	}
	if out.Alive {
		out.recordOut = rec
	} else {
		out.Stale = &rec
	}
	return out
}

func (c *cli) status(ctx context.Context, args []string) error {
	set := c.flags("status")
	home := c.homeFlag(set)
	if _, err := c.parse(set, args, 0); err != nil {
		return err
	}
	abs, err := checkHome(*home)
	if err != nil {
		return err
	}
	out := statusOut{Home: abs}
	info, err := bootstrap.Detect(abs, 0)
	out.State, out.Detail = info.State.String(), info.Detail
	if f, ok := stampFinding(abs, info, err); ok {
		out.Problems = append(out.Problems, findingProblem(f))
		switch {
		case err != nil:
			out.State, out.Detail = stateUnknown, "the stamp or the home cannot be read: see the problems"
		case f.Kind == kindLostStamp:
			out.Detail = f.Detail
		}
	}
	out.Installed = info.State == bootstrap.Ready || info.State == bootstrap.NeedsUpgrade || info.State == bootstrap.TooNew
	out.Schema, out.ToolkitVersion, out.InstalledAt, out.LastBootAt, out.Boots =
		info.Schema, info.ToolkitVersion, info.InstalledAt, info.LastBootAt, info.Boots
	out.MaxFileSize = info.MaxFileSize

	lock, lerr := readLock(abs)
	s, serr := statefile.Read(filepath.Join(abs, statefile.FileName))
	if serr != nil {
		s = nil
	}
	if pid, err := lifecycle.ParseLockContent(lock); lerr == nil && err == nil {
		out.Lock = &lockOut{PID: pid, Alive: lifecycle.LockHolderLive(pid, s)} // the state file's start time tells a reused pid
		if !out.Lock.Alive {
			out.Problems = append(out.Problems, staleLockProblem(pid))
		}
		out.Lock.Stopped = out.Lock.Alive && proc.Stopped(pid)
	} else if f, ok := staleLock(lock, lerr, s); ok {
		out.Problems = append(out.Problems, findingProblem(f)) // no PID, not a file, unreadable: as doctor says
	}
	if s != nil {
		out.Server = toServer(s)
		out.Server.Stopped = out.Server.Alive && proc.Stopped(s.PID)
		if h := s.Health; h != nil && !h.OK && out.Server.Alive {
			for _, p := range h.Problems {
				out.Problems = append(out.Problems, "health check: "+flat(p))
			}
		}
		if !out.Server.Alive {
			out.Problems = append(out.Problems, fmt.Sprintf("the server the state file names, pid %d, is not running: "+
				"it died without cleaning up (the next start, or `mcpkeep doctor --fix`, moves %s to %s/)",
				s.PID, statefile.FileName, bootstrap.BackupsDir))
		}
	} else if !errors.Is(serr, fs.ErrNotExist) {
		out.Problems = append(out.Problems, oneLine(serr))
	}
	switch {
	case out.Server != nil && out.Server.Stopped:
		out.Problems = append(out.Problems, findingProblem(stoppedFinding(out.Server.PID)))
	case out.Lock != nil && out.Lock.Stopped:
		out.Problems = append(out.Problems, findingProblem(stoppedFinding(out.Lock.PID)))
	}
	if out.Server != nil && out.Server.Alive && s.Remote != nil {
		out.Remote = fromState(s.Remote)
	}
	if store, err := readOnlyStore(abs, info.MaxFileSize); err == nil {
		head, herr := store.Head()
		dirty, derr := store.Dirty()
		if out.Remote == nil {
			out.Remote = lastSeen(store)
		}
		// What doctor would find in the repository and the config files,
		// as doctor words it, but for what opening the repository beside
		// a live writer finds: its change in flight, which it completes.
		writing := (out.Lock != nil && out.Lock.Alive) || (out.Server != nil && out.Server.Alive)
		report, ierr := recovery.Inspect(store, recovery.Options{Home: abs, MaxFileSize: info.MaxFileSize})
		store.Close()
		unknown := false // whether dirty is unknown, for a file it cannot read
		for _, f := range report.Findings {
			switch f.Kind {
			case recovery.KindGitRepair:
				if writing {
					continue
				}
			case recovery.KindRefusedFile, recovery.KindUnreadableFile:
				unknown = derr != nil // its scan failed on the file: the finding says why
			}
			out.Problems = append(out.Problems, findingProblem(f))
		}
		if unknown {
			derr = nil
		}
		if err := errors.Join(herr, derr, ierr); err != nil {
			out.Problems = append(out.Problems, oneLine(err))
		} else if !unknown {
			out.Config = &configOut{Head: head, Dirty: dirty}
		}
	} else if out.Installed {
		out.Problems = append(out.Problems, oneLine(err))
	}
	if err := c.emit(out, statusText(out)); err != nil {
		return err
	}
	if n := len(out.Problems); n > 0 {
		return fmt.Errorf("%d problem(s) found in %s, listed in the output", n, abs)
	}
	return nil
}

// findingProblem is status's problem for f, a finding doctor makes too:
// the line doctor prints for it, and who does what it would do.
func findingProblem(f recovery.Finding) string {
	p := flat(f.String())
	if !f.NeedsUser && f.Action != "none" {
		p += " (the next start, or `mcpkeep doctor --fix`, does that)"
	}
	return p
}

// staleLockProblem is status's problem of a PID lock file that names pid,
// a server that is not running (exited, a zombie, or its pid reused
// since): a problem as a stale state file is one, whether or not a state
// file is left, and as doctor's stale-lock finding is.
func staleLockProblem(pid int) string {
	return fmt.Sprintf("the PID lock file %s names pid %d, a server that is not running: it died without releasing the lock "+
		"(the next start, or `mcpkeep doctor --fix`, reclaims it)", lifecycle.LockFile, pid)
}

func statusText(o statusOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "home:      %s\n", o.Home)
	if o.Installed {
		fmt.Fprintf(&b, "installed: yes, schema %d (toolkit %s) on %s; %s, last %s\n", o.Schema, o.ToolkitVersion,
			o.InstalledAt.Local().Format(time.DateTime), count(o.Boots, "boot"), o.LastBootAt.Local().Format(time.DateTime))
	} else if o.State == stateUnknown {
		fmt.Fprintf(&b, "installed: unknown (%s)\n", o.Detail)
	} else if o.Detail != "" {
		fmt.Fprintf(&b, "installed: no (%s: %s)\n", o.State, o.Detail)
	} else {
		fmt.Fprintf(&b, "installed: no (%s)\n", o.State)
	}
	if o.MaxFileSize != 0 {
		fmt.Fprintf(&b, "files:     config files of up to %s (the server's Options.MaxFileSize at its last start)\n", sizeWords(o.MaxFileSize))
	}
	switch {
	case o.Lock == nil:
		fmt.Fprintf(&b, "lock:      free\n")
	case o.Lock.Stopped:
		fmt.Fprintf(&b, "lock:      held by pid %d (stopped)\n", o.Lock.PID)
	case o.Lock.Alive:
		fmt.Fprintf(&b, "lock:      held by pid %d (running)\n", o.Lock.PID)
	default:
		fmt.Fprintf(&b, "lock:      stale, pid %d is not running (the next start reclaims it)\n", o.Lock.PID)
	}
	if s := o.Server; s != nil {
		live := "running"
		switch {
		case !s.Alive:
			live = "not running: stale state file"
		case s.Stopped:
			live = "stopped: it answers no one until continued"
		}
		fmt.Fprintf(&b, "server:    %s %s, pid %d, %s (%s), started %s\n", s.Name, s.Version, s.PID, s.Status, live,
			s.StartedAt.Local().Format(time.DateTime))
		fmt.Fprintf(&b, "transport: stdio=%t", s.Stdio)
		if s.Socket != "" {
			fmt.Fprintf(&b, " socket=%s", s.Socket)
		}
		if s.URL != "" {
			fmt.Fprintf(&b, " http=%s", s.URL)
			if s.HTTPSessions != nil && s.HTTPConnections != nil {
				// The health check writes the counts: they can be a
				// health interval old, where /healthz's are live.
				fmt.Fprintf(&b, " (%s, %s as of the last health check", count(*s.HTTPSessions, "session"), count(*s.HTTPConnections, "connection"))
				if s.Health != nil {
					fmt.Fprintf(&b, ", %s", s.Health.CheckedAt.Local().Format(time.DateTime))
				}
				b.WriteString("; /healthz has them live)")
			}
		}
		b.WriteString("\n")
		if s.Stale != nil {
			writeStale(&b, s)
		} else {
			writeRole(&b, s.Cluster)
			writeSessions(&b, s)
			writeHealth(&b, s.Health, s.Stopped)
		}
	} else {
		b.WriteString("server:    none running\n")
	}
	if cfg := o.Config; cfg != nil {
		dirty := "clean"
		if cfg.Dirty {
			dirty = "uncommitted changes"
		}
		fmt.Fprintf(&b, "config:    HEAD %s, %s\n", short(cfg.Head), dirty)
	}
	if r := o.Remote; r != nil {
		fmt.Fprintf(&b, "remote:    %s (%s): ahead %d, behind %d", r.URL, cmp.Or(r.Mode, "mode unknown"), r.Ahead, r.Behind)
		if !r.LastPush.IsZero() {
			fmt.Fprintf(&b, ", last push %s", r.LastPush.Local().Format(time.DateTime))
		}
		if len(r.Conflicts) > 0 {
			fmt.Fprintf(&b, ", %d conflict(s) to look at (mcpkeep sync)", len(r.Conflicts))
		}
		b.WriteString("\n")
		if r.Error != "" {
			fmt.Fprintf(&b, "remote:    last error: %s\n", flat(r.Error))
		}
	}
	for _, p := range o.Problems {
		fmt.Fprintf(&b, "problem:   %s\n", p)
	}
	return b.String()
}

// writeRole writes the server's role among hosts, if it has one.
func writeRole(b *strings.Builder, c *statefile.Cluster) {
	if c != nil {
		fmt.Fprintf(b, "role:      %s\n", roleWords(c))
	}
}

// roleWords describes a server's role among hosts.
func roleWords(c *statefile.Cluster) string {
	since := c.Since.Local().Format(time.DateTime)
	other := "no active writer is known"
	if c.Active != "" {
		other = "the active writer is " + c.Active
		if c.ActiveHost != "" {
			other += " on " + c.ActiveHost
		}
	}
	switch c.Role {
	case statefile.RoleActive:
		return fmt.Sprintf("active writer (term %d) since %s", c.Term, since)
	case statefile.RoleStandby:
		return fmt.Sprintf("standby since %s (refuses MCP requests); %s", since, other)
	case statefile.RoleReadOnly:
		return fmt.Sprintf("read-only since %s: lost the writer's lease (etcd does not answer); serves reads, refuses changes", since)
	default:
		return fmt.Sprintf("%q since %s", c.Role, since)
	}
}

// writeHealth writes a running server's last health check: for a
// stopped server, as its last one, which is not live.
func writeHealth(b *strings.Builder, h *statefile.Health, stopped bool) {
	if stopped {
		writeLastHealth(b, h, "health:    unknown: the server is stopped")
		return
	}
	switch {
	case h == nil:
		b.WriteString("health:    not checked yet\n")
	case h.OK:
		fmt.Fprintf(b, "health:    ok (checked %s)\n", h.CheckedAt.Local().Format(time.DateTime))
	default:
		fmt.Fprintf(b, "health:    failing (checked %s): %d problem(s)\n", h.CheckedAt.Local().Format(time.DateTime), len(h.Problems))
	}
}

// writeStale writes what the stale state file of a server that is not
// running recorded as it ran, each line saying that none of it is live:
// its role, its clients and its last health check.
func writeStale(b *strings.Builder, s *serverOut) {
	const file = "the stale state file"
	r := s.Stale
	if r.Cluster != nil {
		fmt.Fprintf(b, "role:      none: the server is not running (%s says: %s)\n", file, roleWords(r.Cluster))
	}
	switch c := r.Client; {
	case c != nil:
		fmt.Fprintf(b, "client:    none live (%s names %s, stdio, since %s)\n", file, clientWords(c), c.Since.Local().Format(time.DateTime))
	case s.Stdio:
		b.WriteString("client:    none live\n")
	}
	switch {
	case s.Socket == "":
		b.WriteString("attached:  none (the server takes no attached clients)\n")
	case len(r.Sessions) == 0:
		b.WriteString("attached:  none live\n")
	default:
		fmt.Fprintf(b, "attached:  none live; %s lists %s:\n", file, count(len(r.Sessions), "session"))
		for _, a := range r.Sessions {
			fmt.Fprintf(b, "           %s\n", sessionWords(a))
		}
	}
	writeLastHealth(b, r.Health, "health:    unknown: the server is not running")
}

// writeLastHealth writes the health line of a server whose health is not
// live, headed by unknown: what its last check, h, found, and when.
func writeLastHealth(b *strings.Builder, h *statefile.Health, unknown string) {
	switch {
	case h == nil:
		fmt.Fprintf(b, "%s (it was never checked)\n", unknown)
	case h.OK:
		fmt.Fprintf(b, "%s (its last check passed, at %s)\n", unknown, h.CheckedAt.Local().Format(time.DateTime))
	default:
		fmt.Fprintf(b, "%s (its last check found %s, at %s)\n", unknown, count(len(h.Problems), "problem"), h.CheckedAt.Local().Format(time.DateTime))
	}
}

// count says n of what, "1 session" or "2 sessions".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// writeSessions writes the server's own client, if it serves stdio, and
// the sessions attached to it, one a line.
func writeSessions(b *strings.Builder, s *serverOut) {
	switch c := s.Client; {
	case c != nil:
		fmt.Fprintf(b, "client:    %s (stdio, since %s)\n", clientWords(c), c.Since.Local().Format(time.DateTime))
	case s.Stdio:
		b.WriteString("client:    stdio, not named yet\n")
	}
	if s.Socket == "" {
		b.WriteString("attached:  none (the server takes no attached clients)\n")
		return
	}
	if len(s.Sessions) == 0 {
		b.WriteString("attached:  none\n")
		return
	}
	for i, a := range s.Sessions {
		label := "attached:  "
		if i > 0 {
			label = "           "
		}
		fmt.Fprintf(b, "%s%s\n", label, sessionWords(a))
	}
}

// clientWords names the server's own client: its name and version.
func clientWords(c *clientOut) string {
	if c.Name == "" {
		return "(not named)"
	}
	return strings.TrimSpace(c.Name + " " + c.Version)
}

// sessionWords describes an attached session: its process, client and
// since.
func sessionWords(a sessionOut) string {
	client := "(client not named yet)"
	if a.Client != "" {
		client = strings.TrimSpace(a.Client + " " + a.ClientVersion)
	}
	return fmt.Sprintf("pid %d, %s, since %s", a.PID, client, a.Since.Local().Format(time.DateTime))
}

// fromState converts a server's remote status from its state file.
func fromState(r *statefile.Remote) *gitstore.RemoteStatus {
	return &gitstore.RemoteStatus{URL: r.URL, Mode: r.Mode, Branch: r.Branch, Head: r.Head, Remote: r.Remote,
		Ahead: r.Ahead, Behind: r.Behind, OldestUnpushed: r.OldestUnpushed, LastFetch: r.LastFetch,
		LastPush: r.LastPush, Error: r.Error, Conflicts: r.Conflicts}
}

// lastSeen returns where store stood with its remote (named by the
// environment or the home) at its last fetch or push, nil without one.
func lastSeen(store *gitstore.Store) *gitstore.RemoteStatus {
	ro, _ := lifecycle.RemoteFromEnv()
	resolved, ok, err := lifecycle.ResolveRemote(store, ro)
	if err != nil || !ok {
		return nil
	}
	st, err := store.LastSeen(resolved.URL, resolved.Branch)
	if err != nil {
		return nil
	}
	st.Mode = resolved.Mode.String()
	return &st
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	if hash == "" {
		return "(no commits)"
	}
	return hash
}

// readLock reads home's PID lock file (lockfile's "<pid>\n", which
// lifecycle.ParseLockContent parses as the lock does), as a regular file
// only: a link is not followed and a pipe not waited on. status and
// doctor read it once and judge what they read.
func readLock(home string) ([]byte, error) {
	return atomicfile.ReadFile(filepath.Join(home, lifecycle.LockFile))
}

func (c *cli) servers(ctx context.Context, args []string) error {
	set := c.flags("servers")
	path := set.String("registry", statefile.DefaultRegistryPath(), "registry file (env MCPKEEP_REGISTRY)")
	if _, err := c.parse(set, args, 0); err != nil {
		return err
	}
	if *path == "" {
		return &usageError{"no registry: pass --registry FILE (MCPKEEP_REGISTRY is empty, which disables it)"}
	}
	entries, err := statefile.NewRegistry(*path).List()
	if err != nil {
		return err
	}
	list := []*serverOut{}
	var b strings.Builder
	for _, e := range entries {
		s := toServer(&e.State)
		s.Attached = e.Sessions
		list = append(list, s)
		transport := "stdio"
		if s.URL != "" {
			transport = s.URL
			if s.Stdio {
				transport = "stdio+" + s.URL
			}
		}
		if s.Attached > 0 {
			transport += fmt.Sprintf(" +%d attached", s.Attached)
		}
		if s.Cluster != nil {
			transport += " (" + s.Cluster.Role + ")"
		}
		fmt.Fprintf(&b, "%-10s pid %-7d %-8s %s  %s\n", s.Name, s.PID, s.Status, transport, s.Home)
	}
	if len(list) == 0 {
		b.WriteString("no live servers in " + *path + "\n")
	}
	return c.emit(map[string]any{"registry": *path, "servers": list}, b.String())
}

func (c *cli) doctor(ctx context.Context, args []string) error {
	set := c.flags("doctor")
	home := c.homeFlag(set)
	fix := set.Bool("fix", false, "repair what it finds (refused while a server holds the home)")
	if _, err := c.parse(set, args, 0); err != nil {
		return err
	}
	abs, err := installedHome(*home)
	if err != nil {
		return err
	}
	info, derr := bootstrap.Detect(abs, 0) // Info{} on an error: no MaxFileSize, as HomeMaxFileSize gives
	opts := recovery.Options{Home: abs, DryRun: !*fix, MaxFileSize: info.MaxFileSize}
	var writerFindings []recovery.Finding // what recovery does not look at: the stamp, what a dead writer left
	if f, ok := stampFinding(abs, info, derr); ok {
		writerFindings = append(writerFindings, f)
	}
	if *fix {
		lock, err := lifecycle.TryLock(abs)
		if err != nil {
			if errors.Is(err, lifecycle.ErrLocked) {
				return fmt.Errorf("%w; stop that server first: doctor --fix does not write beside a live server", err)
			}
			return err
		}
		defer lock.Unlock()
		for _, r := range lock.Reclaimed() {
			writerFindings = append(writerFindings, recovery.Finding{Kind: kindStaleLock, Path: lifecycle.LockFile, Action: "reclaimed", Detail: r})
		}
		// Before recovery moves the state file, which may name a socket
		// outside the home.
		removed, err := lock.RemoveStaleSockets()
		if err != nil {
			return err
		}
		for _, p := range removed {
			writerFindings = append(writerFindings, staleSocket(abs, p, "removed"))
		}
	} else {
		state := readState(abs)
		lock, lerr := readLock(abs)
		if f, ok := staleLock(lock, lerr, state); ok {
			writerFindings = append(writerFindings, f)
		}
		if pid, ok := stoppedWriter(lock, lerr, state); ok {
			writerFindings = append(writerFindings, stoppedFinding(pid))
		}
		for _, p := range lifecycle.StaleSockets(abs) {
			writerFindings = append(writerFindings, staleSocket(abs, p, "would be removed"))
		}
	}
	report, err := recovery.Run(ctx, opts)
	if err != nil {
		return err
	}
	report.Findings = append(writerFindings, report.Findings...)
	if !*fix && slices.ContainsFunc(report.Findings, diedHere) {
		report.Notes = append(report.Notes, "a server died here: --fix may also rebuild config/.git/index from HEAD, "+
			"which a dry run does not compare the index with (beside a live server it is often not HEAD's yet)")
	}
	if err := c.emit(report, report.String()+"\n"); err != nil {
		return err
	}
	switch {
	case slices.ContainsFunc(report.Findings, func(f recovery.Finding) bool { return f.Kind == recovery.KindNotInstalled }):
		return fmt.Errorf("home %s is not installed: its install was interrupted; start the server once to finish it", abs)
	case report.NeedsUser():
		return errors.New("some findings need you: see the remedies above")
	case !*fix && !report.Clean():
		return errors.New("problems found: run `mcpkeep doctor --fix` with the server stopped")
	}
	return nil
}

// diedHere reports whether f shows that a server died on the home: its
// PID lock file or its state file was left.
func diedHere(f recovery.Finding) bool {
	return f.Kind == kindStaleLock || f.Kind == recovery.KindStaleState
}

// kindStaleLock is the kind of doctor's finding of a PID lock file that
// names no running server (recovery does not look at the home's lock).
const kindStaleLock = "stale-lock"

// kindStaleSocket is the kind of doctor's finding of an attach socket a
// writer that is not running left, in the home or, for a home whose path
// is too long for a socket address, where its state file says; or of a
// temporary socket beside it (.mcp.sock.*), which a writer killed between
// binding its socket and renaming it into place leaves.
const kindStaleSocket = "stale-socket"

// staleSocket returns doctor's finding of the stale socket at path, with
// action: its path relative to home, or absolute outside it.
func staleSocket(home, path, action string) recovery.Finding {
	if rel, err := filepath.Rel(home, path); err == nil && filepath.IsLocal(rel) {
		path = filepath.ToSlash(rel)
	}
	return recovery.Finding{Kind: kindStaleSocket, Path: path, Action: action,
		Detail: "nothing listens on it: the server that bound it is not running"}
}

// staleLock returns doctor's finding, without --fix, for the home's PID
// lock file as readLock read it (data, or the read's error), whose state
// file is s (or nil), wherever status lists a
// problem of it: when it names no running writer (lifecycle.LockHolderLive,
// as status judges it), holds no PID, or is not a regular file, each of
// which the next start, or doctor --fix, reclaims; or when it cannot be
// read, which needs the user. It only reads.
func staleLock(data []byte, err error, s *statefile.State) (recovery.Finding, bool) {
	f := recovery.Finding{Kind: kindStaleLock, Path: lifecycle.LockFile, Action: "would be reclaimed"}
	var refused *atomicfile.RefusedError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return recovery.Finding{}, false
	case errors.As(err, &refused) && refused.Mode.Type() != 0:
		f.Detail = fmt.Sprintf("%s is %s, not a PID file; it is moved to %s/ as it is", lifecycle.LockFile, refused.Kind(), bootstrap.BackupsDir)
		return f, true
	case err != nil:
		return recovery.Finding{Kind: recovery.KindUnreadableFile, Path: lifecycle.LockFile, Action: "none", Detail: flat(err.Error()),
			NeedsUser: true, Remedy: "a home's files must belong to the user its server runs as: give it back to it (chown, chmod u+rw)"}, true
	}
	pid, err := lifecycle.ParseLockContent(data)
	switch {
	case err != nil:
		f.Detail = fmt.Sprintf("holds %v (a copy is kept in %s/)", err, bootstrap.BackupsDir)
	case lifecycle.LockHolderLive(pid, s):
		return recovery.Finding{}, false
	case proc.Live(pid):
		f.Detail = fmt.Sprintf("pid %d runs, but is not the server the state file names: that one died, and its pid was taken since", pid)
	default:
		f.Detail = fmt.Sprintf("pid %d is not running: the server died without cleaning up", pid)
	}
	return f, true
}

// readState returns the home's state file, or nil if there is none or it
// does not read (status and doctor report that of their own).
func readState(home string) *statefile.State {
	s, err := statefile.Read(filepath.Join(home, statefile.FileName))
	if err != nil {
		return nil
	}
	return s
}

func (c *cli) history(ctx context.Context, args []string) error {
	set := c.flags("history")
	home := c.homeFlag(set)
	n := set.Int("n", 20, "most commits to show (0 = all)")
	pos, err := c.parse(set, args, 1)
	if err != nil {
		return err
	}
	if *n < 0 {
		return &usageError{fmt.Sprintf("-n %d: want 0 or more", *n)}
	}
	abs, err := installedHome(*home)
	if err != nil {
		return err
	}
	path := ""
	if len(pos) == 1 {
		path = pos[0]
	}
	store, err := readOnlyStore(abs, lifecycle.HomeMaxFileSize(abs))
	if err != nil {
		return err
	}
	defer store.Close()
	commits, err := store.History(path, *n)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, cm := range commits {
		fmt.Fprintf(&b, "%s %s %s\n", short(cm.Hash), cm.When.Local().Format(time.DateTime), firstLine(cm.Message))
	}
	switch {
	case len(commits) == 0 && path != "":
		example := ""
		if files, err := store.FilesAt("HEAD"); err == nil && len(files) > 0 {
			example = ", such as " + files[0] // one this home has: a server's files are its own
		}
		fmt.Fprintf(&b, "no commits: no commit of the config has ever held %s (paths are relative to %s%s)\n",
			path, filepath.Join(abs, "config"), example)
	case len(commits) == 0:
		b.WriteString("no commits\n")
	}
	if commits == nil {
		commits = []gitstore.Commit{}
	}
	return c.emit(map[string]any{"home": abs, "path": path, "commits": commits}, b.String())
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func (c *cli) rollback(ctx context.Context, args []string) error {
	set := c.flags("rollback")
	home := c.homeFlag(set)
	pos, err := c.parse(set, args, 1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return &usageError{"missing REV: a commit hash from `mcpkeep history`, HEAD~N or a tag"}
	}
	abs, err := installedHome(*home)
	if err != nil {
		return err
	}
	var n notes // a reclaimed lock, a repaired repository: part of the output
	env, closeEnv, err := lifecycle.OpenHome(abs, n.logger())
	if err != nil {
		if errors.Is(err, lifecycle.ErrLocked) {
			return fmt.Errorf("%w; stop that server first: rollback does not write beside a live server", err)
		}
		return err
	}
	hash, err := env.Rollback(ctx, pos[0])
	err = errors.Join(err, closeEnv())
	if err != nil {
		return err
	}
	text := fmt.Sprintf("config is now as at %s (commit %s)\n", pos[0], short(hash))
	if hash == "" {
		text = fmt.Sprintf("config already equals %s; nothing committed\n", pos[0])
	}
	out := map[string]any{"home": abs, "rev": pos[0], "commit": hash}
	if notes := n.list(); len(notes) > 0 {
		out["notes"] = notes
	}
	return c.emit(out, n.text()+text)
}

// readOnlyStore opens the config repository of home read-only, reading
// files with limit, the size limit the home's server last started with
// (lifecycle.HomeMaxFileSize, or the stamp's Info.MaxFileSize where the
// caller read it already).
func readOnlyStore(home string, limit int64) (*gitstore.Store, error) {
	return gitstore.Open(filepath.Join(home, bootstrap.ConfigDir),
		&gitstore.Options{ReadOnly: true, MaxFileSize: limit})
}

// sizeWords words a size limit of bytes (negative: none), "4 MiB".
func sizeWords(limit int64) string {
	switch {
	case limit < 0:
		return "any size"
	case limit%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", limit>>20)
	}
	return fmt.Sprintf("%d bytes", limit)
}
