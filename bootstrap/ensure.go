package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// Migration moves config/ from schema From to schema To.
type Migration struct {
	From, To int    // the schemas before and after it; From < To
	Name     string // for logs and errors, such as "rename tone to voice"
	// Apply changes the files in configDir. It need not be atomic: a
	// failure or a crash puts config/ back from the backup taken before.
	Apply func(ctx context.Context, configDir string) error
}

// Spec describes what a home must look like.
type Spec struct {
	Home           string // the home directory; created if missing
	Schema         int    // the current schema version, 1 or more
	ToolkitVersion string // "" = ToolkitVersion()
	// Dirs are extra directories (relative to Home, without "..") created
	// 0700, besides config/, checkpoints/ and backups/; a name the layout
	// uses for a file (.version, .lock, state.json) is refused.
	Dirs []string
	// Defaults are the default files, rooted like config/. A file a user
	// already put there is never overwritten.
	Defaults fs.FS
	// Migrations are applied in a chain from the stamped schema to Schema.
	// They must form one chain: each has an Apply and a From below its To,
	// no two start at the same schema, and each ends at Schema or where
	// another starts. Ensure checks this before it touches the home.
	Migrations []Migration
	// Validate checks config/ after migrations, before the commit; an error
	// fails the upgrade like a failing migration.
	Validate func(configDir string) error
	// Git sets the config repository's author and pack threshold for the
	// commits Ensure makes; HoldsLock is implied. A lifecycle.Harness uses
	// it for every commit of the home.
	Git    *gitstore.Options
	Logger *slog.Logger // nil = discard
	// DeferBoot, on a home that is already Ready, leaves the boot record
	// (last_boot_at, boots and toolkit_version in the stamp) to
	// Result.RecordBoot, so that a caller can write it beside its other
	// start-up work instead of before it. Result.After already holds the
	// record. An install, a finished install and an upgrade write the
	// stamp as always: it is what marks them done.
	DeferBoot bool
	// MaxFileSize is the largest config file the server reads, in bytes
	// (0 means atomicfile.DefaultMaxSize, a negative value no limit),
	// which every boot record stamps, so that tools reading the home
	// (Info.MaxFileSize) use the same limit. A lifecycle.Harness sets it to
	// its Options.MaxFileSize. Ensure itself reads config files with the
	// limit of Git.
	MaxFileSize int64
	// Server is the name of the server whose home this is (a
	// lifecycle.Harness sets its Options.Name). The stamp records it, and
	// Ensure refuses, with an *OtherServerError, a home whose stamp names
	// another: one server's files are not another's to read, change or
	// migrate. A home stamped without a name (by an older mcpkeep) is
	// taken, and named, by the first start that gives one; "" neither
	// records nor checks a name.
	Server string
}

// Result says what Ensure found and did.
type Result struct {
	Before    Info   // the home as Ensure found it (Detect)
	After     Info   // the home as Ensure left it: Ready (with DeferBoot, once RecordBoot)
	Installed bool   // a fresh install
	Resumed   bool   // an interrupted install finished
	Upgraded  bool   // migrations ran
	Commit    string // the install or migration commit, if one was made

	boot *pendingBoot // the boot record; written by Ensure unless deferred
}

// pendingBoot is the boot record Ensure stamps, written once: by Ensure,
// or, with Spec.DeferBoot on a ready home, by RecordBoot.
type pendingBoot struct {
	home string
	st   stamp
	once sync.Once
	err  error
}

// RecordBoot writes the boot record that Spec.DeferBoot left unwritten,
// durably, and returns nil at once when there is none (Ensure wrote it).
// It writes the stamp, so it runs under the home lock, as Ensure does;
// calls after the first return the first one's result.
func (r Result) RecordBoot() error {
	b := r.boot
	if b == nil {
		return nil
	}
	b.once.Do(func() {
		if b.err = failpoint.Hit("bootstrap.before-stamp"); b.err == nil {
			b.err = writeStamp(b.home, b.st)
		}
	})
	return b.err
}

// Ensure brings the home of spec to the current schema: it installs a fresh
// home, finishes an interrupted install, or upgrades an older one, and
// records the boot in the stamp. It returns an error matching ErrTooNew for
// a home of a newer schema, a *MigrationError when an upgrade fails, and a
// *SpecError, before touching the home, for a Spec it cannot use.
// Call it while holding the home's lock.
func Ensure(ctx context.Context, spec Spec) (Result, error) {
	if err := spec.check(); err != nil {
		return Result{}, err
	}
	if err := checkHome(spec.Home); err != nil {
		return Result{}, err
	}
	if spec.ToolkitVersion == "" {
		spec.ToolkitVersion = ToolkitVersion()
	}
	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &ensurer{spec: spec, log: log, config: filepath.Join(spec.Home, ConfigDir)}
	if err := e.finishUpgradeRestore(); err != nil {
		return Result{}, err
	}
	before, err := Detect(spec.Home, spec.Schema)
	if err != nil {
		return Result{}, err
	}
	if before.Server != "" && spec.Server != "" && before.Server != spec.Server {
		return Result{}, &OtherServerError{Home: spec.Home, Stamped: before.Server, Server: spec.Server}
	}
	res := Result{Before: before}
	now := time.Now().UTC().Truncate(time.Second)
	var st stamp
	switch before.State {
	case TooNew:
		return res, fmt.Errorf("%s: %s; upgrade this server, never downgrade a home: %w",
			filepath.Join(spec.Home, VersionFile), before.Detail, ErrTooNew)
	case Fresh, Incomplete:
		if before.State == Incomplete {
			// A lost stamp over a config history: the install and migrate
			// commits say whose home it is and of which schema, and that
			// is the truth. A refusal leaves the home as it is.
			s, server := e.fromHistory()
			if server != "" && spec.Server != "" && server != spec.Server {
				return res, &OtherServerError{Home: spec.Home, Stamped: server, Server: spec.Server, byHistory: true}
			}
			if s > e.spec.Schema {
				return res, fmt.Errorf("%s: config history says schema %d, newer than this server's %d; upgrade this server: %w",
					e.config, s, e.spec.Schema, ErrTooNew)
			}
			if err := e.quarantineStamp(); err != nil {
				return res, err
			}
			if s > 0 && s < e.spec.Schema {
				st = stamp{Schema: s, InstalledAt: now}
				if res.Commit, err = e.upgrade(ctx, s); err != nil {
					return res, err
				}
				st.Schema, res.Upgraded, res.Resumed = spec.Schema, true, true
				break
			}
		}
		if st, err = e.install(ctx, now); err != nil {
			return res, err
		}
		res.Installed, res.Resumed = before.State == Fresh, before.State == Incomplete
	case NeedsUpgrade:
		st = stampOf(before)
		if res.Commit, err = e.upgrade(ctx, before.Schema); err != nil {
			return res, err
		}
		st.Schema, res.Upgraded = spec.Schema, true
	case Ready:
		st = stampOf(before)
	}
	st.ToolkitVersion, st.LastBootAt, st.Boots = spec.ToolkitVersion, now, st.Boots+1
	st.MaxFileSize = recordedLimit(spec.MaxFileSize)
	if spec.Server != "" {
		st.Server = spec.Server
	}
	res.boot = &pendingBoot{home: spec.Home, st: st}
	if before.State != Ready || !spec.DeferBoot {
		if err := res.RecordBoot(); err != nil {
			return res, err
		}
	}
	if err := e.endUpgrade(); err != nil {
		return res, err
	}
	res.After = Info{State: Ready, Schema: st.Schema, ToolkitVersion: st.ToolkitVersion,
		InstalledAt: st.InstalledAt, LastBootAt: st.LastBootAt, Boots: st.Boots, MaxFileSize: st.MaxFileSize, Server: st.Server}
	return res, nil
}

// checkServer refuses a home whose stamp names a server other than
// server, for a step that touches the home before Detect reads the stamp.
// A stamp that is missing or does not read names none: Detect and the
// install deal with it.
func checkServer(home, server string) error {
	if server == "" {
		return nil
	}
	st, err := readStamp(home)
	if err != nil || st.Server == "" || st.Server == server {
		return nil
	}
	return &OtherServerError{Home: home, Stamped: st.Server, Server: server}
}

// check reports what makes the spec unusable: a programming error, found
// before anything in the home is touched.
func (spec *Spec) check() error {
	if spec.Home == "" {
		return &SpecError{Field: "Home", Problem: "is empty: give the home directory"}
	}
	if spec.Schema < 1 {
		return &SpecError{Field: "Schema", Problem: fmt.Sprintf("is %d: give the schema version of the home's files, 1 or more (1 for a server's first)", spec.Schema)}
	}
	for i, d := range spec.Dirs {
		if !filepath.IsLocal(d) {
			return &SpecError{Field: fmt.Sprintf("Dirs[%d]", i), Problem: fmt.Sprintf("%q is not a path inside the home: give a relative path without \"..\", such as \"cache\"", d)}
		}
		switch first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(d)), "/"); {
		case first == ConfigDir, first == CheckpointsDir, first == BackupsDir:
		case IsLayoutName(first):
			return &SpecError{Field: fmt.Sprintf("Dirs[%d]", i), Problem: fmt.Sprintf("%q is a file of the home's own (%s): give another name", d, first)}
		}
	}
	from := map[int]string{}
	for i, m := range spec.Migrations {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		bad := func(format string, args ...any) error {
			return &SpecError{Field: fmt.Sprintf("Migrations[%d]", i), Problem: fmt.Sprintf("(migration %q, v%d→v%d): %s", name, m.From, m.To, fmt.Sprintf(format, args...))}
		}
		switch {
		case m.Apply == nil:
			return bad("Apply is nil: give the function that moves a home's files from v%d to v%d", m.From, m.To)
		case m.From < 1:
			return bad("From must be 1 or more")
		case m.From >= m.To:
			return bad("From must be below To")
		case m.To > spec.Schema:
			return bad("To is past the current schema %d", spec.Schema)
		}
		if other, ok := from[m.From]; ok {
			return bad("migration %q also starts at v%d: which one runs would depend on their order", other, m.From)
		}
		from[m.From] = name
	}
	// A chain that ends short of Schema strands every home that reaches
	// its end; a home older than the first migration is refused by chain.
	for i, m := range spec.Migrations {
		if _, ok := from[m.To]; !ok && m.To != spec.Schema {
			return &SpecError{Field: fmt.Sprintf("Migrations[%d]", i), Problem: fmt.Sprintf("(migration %q, v%d→v%d): no migration starts at v%d, so a home there can never reach schema %d",
				from[m.From], m.From, m.To, m.To, spec.Schema)}
		}
	}
	return nil
}

// Check reports what Ensure would refuse in spec before touching the home,
// as a *SpecError naming the field; it does no I/O.
func (spec Spec) Check() error { return spec.check() }

// SpecError is a Spec that Ensure refuses before it touches the home: a
// field is missing or out of range, the migrations do not form one
// chain, or (Field "Migrations", from Ensure alone, not Check) none of them
// starts at the schema of the home, which is older than Spec.Schema.
type SpecError struct {
	Field   string // the field as written in code: "Schema", "Migrations[1]"
	Problem string // what is wrong and what to set, following the field's name in Error
}

// Error names the field and the problem.
func (e *SpecError) Error() string { return "bootstrap: Spec." + e.Field + " " + e.Problem }

func stampOf(i Info) stamp {
	return stamp{Schema: i.Schema, ToolkitVersion: i.ToolkitVersion, InstalledAt: i.InstalledAt, LastBootAt: i.LastBootAt, Boots: i.Boots,
		MaxFileSize: i.MaxFileSize, Server: i.Server}
}

type ensurer struct {
	spec   Spec
	log    *slog.Logger
	config string
}

func (e *ensurer) gitOptions() *gitstore.Options {
	var o gitstore.Options
	if e.spec.Git != nil {
		o = *e.spec.Git
	}
	o.HoldsLock = true
	if o.Logger == nil {
		o.Logger = e.log
	}
	return &o
}

// install creates the layout, writes the defaults, makes the initial commit
// once, and returns the stamp to write. Every step is idempotent, so an
// install interrupted anywhere is finished by running it again.
func (e *ensurer) install(ctx context.Context, now time.Time) (stamp, error) {
	st := stamp{Schema: e.spec.Schema, InstalledAt: now}
	if err := e.makeDirs(); err != nil {
		return st, err
	}
	if err := failpoint.Hit("bootstrap.after-dirs"); err != nil {
		return st, err
	}
	if err := e.writeDefaults(); err != nil {
		return st, err
	}
	if err := failpoint.Hit("bootstrap.after-defaults"); err != nil {
		return st, err
	}
	store, err := gitstore.Init(e.config, e.gitOptions())
	if err != nil {
		return st, err
	}
	defer store.Close()
	if err := failpoint.Hit("bootstrap.after-git-init"); err != nil {
		return st, err
	}
	head, err := store.Head()
	if err != nil {
		return st, err
	}
	if head == "" {
		if _, err := store.Commit(installMessage(e.spec.Schema, e.spec.Server)); err != nil {
			return st, err
		}
		e.log.Info("installed a fresh home", "schema", e.spec.Schema)
	}
	return st, failpoint.Hit("bootstrap.after-initial-commit")
}

// makeDirs creates the layout's directories, 0700.
func (e *ensurer) makeDirs() error {
	dirs := append([]string{ConfigDir, CheckpointsDir, BackupsDir}, e.spec.Dirs...)
	for _, d := range dirs {
		if err := atomicfile.MkdirAll(filepath.Join(e.spec.Home, d), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// writeDefaults copies spec.Defaults into config/ without replacing any
// existing file.
func (e *ensurer) writeDefaults() error {
	if e.spec.Defaults == nil {
		return nil
	}
	return fs.WalkDir(e.spec.Defaults, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("bootstrap: read the default files (Spec.Defaults): %w; check the fs.FS given, "+
				"such as an os.DirFS of a directory that exists or an fs.Sub of an embed.FS with the right path", err)
		}
		dst := filepath.Join(e.config, filepath.FromSlash(p))
		if d.IsDir() {
			return atomicfile.MkdirAll(dst, 0o700)
		}
		if _, err := os.Lstat(dst); err == nil {
			return nil // the user's file wins
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		data, err := fs.ReadFile(e.spec.Defaults, p)
		if err != nil {
			return fmt.Errorf("bootstrap: default file %s: %w", p, err)
		}
		return atomicfile.WriteFile(dst, data, 0o600)
	})
}

// quarantineStamp moves an unreadable .version into backups/.
func (e *ensurer) quarantineStamp() error {
	path := filepath.Join(e.spec.Home, VersionFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	backups := filepath.Join(e.spec.Home, BackupsDir)
	if err := atomicfile.MkdirAll(backups, 0o700); err != nil {
		return err
	}
	saved, err := atomicfile.Backup(path, backups)
	if err != nil {
		return err
	}
	e.log.Warn("unreadable stamp quarantined", "path", path, "copy", saved)
	return os.Remove(path)
}

var (
	schemaMsg = regexp.MustCompile(`^(?:install: schema (\d+)|migrate v\d+→v(\d+))`)
	serverMsg = regexp.MustCompile(`^install: schema \d+ of server ("(?:[^"\\]|\\.)*")`)
)

// OwnMessage reports whether msg begins as the commits bootstrap makes do
// (`install: schema N`, `migrate vA→vB`). When a home's stamp is lost,
// Ensure reads the home's schema from those commits in its history, so
// no other commit may be made in their words: lifecycle's Env.Update and
// Env.Commit refuse such a message, which a tool may have taken from its
// client.
func OwnMessage(msg string) bool {
	return schemaMsg.MatchString(strings.TrimSpace(msg))
}

// installMessage is the message of the install commit: the schema, and the
// server when the spec names it, so that the history says whose home it is
// if the stamp is lost.
func installMessage(schema int, server string) string {
	if server == "" {
		return fmt.Sprintf("install: schema %d", schema)
	}
	return fmt.Sprintf("install: schema %d of server %q", schema, server)
}

// fromHistory returns the schema named by the newest install or migrate
// commit of config/, and the server named by its first commit, which is
// the install's (a later commit's message is anybody's: a tool may commit
// with the words its client gave); 0 and "" when there are none or config/
// does not read. It opens the repository read-only: a refusal by what it
// finds must not have repaired another server's repository first.
func (e *ensurer) fromHistory() (schema int, server string) {
	if _, err := os.Stat(filepath.Join(e.config, ".git")); err != nil {
		return 0, ""
	}
	o := e.gitOptions()
	o.HoldsLock, o.ReadOnly = false, true
	store, err := gitstore.Open(e.config, o)
	if err != nil {
		return 0, ""
	}
	defer store.Close()
	commits, err := store.History("", 0)
	if err != nil || len(commits) == 0 {
		return 0, ""
	}
	for _, c := range commits {
		if m := schemaMsg.FindStringSubmatch(c.Message); m != nil {
			schema, _ = strconv.Atoi(m[1] + m[2])
			break
		}
	}
	if m := serverMsg.FindStringSubmatch(commits[len(commits)-1].Message); m != nil {
		server, _ = strconv.Unquote(m[1])
	}
	return schema, server
}
