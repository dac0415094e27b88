package recovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// Directories of a home.
const (
	ConfigDir  = "config"
	BackupsDir = "backups"
)

type runner struct {
	opts       Options
	home       string
	log        *slog.Logger
	report     Report
	unreadable int             // config files that could not be read
	refused    int             // entries of config/ that are not regular files, or too large
	store      *gitstore.Store // the config repository, once the config step opened it
	undone     []undone        // the interrupted updates the checkpoints step rolled back
}

// undone is an update a checkpoint rolled back: its op, which Env.Update
// also makes its commit's message, and its paths.
type undone struct {
	op    string
	paths []string
}

// Run checks the home and, unless opts.DryRun, repairs it. See the package
// documentation for what it does, in order. The error is for a home that
// could not be checked at all (permissions, I/O); everything else is a
// Finding.
func Run(ctx context.Context, opts Options) (Report, error) {
	report, store, err := RunAndOpen(ctx, opts)
	if store != nil {
		err = errors.Join(err, store.Close())
	}
	return report, err
}

// RunAndOpen is Run that also returns the config repository it checked,
// still open, for a caller that goes on to use it and closes it: a
// server's start then opens the repository once, not twice (the harness
// serves with it). The store is nil when the home is not installed, when
// the repository could not be opened (a finding says why) and on error;
// with opts.DryRun it is read-only.
func RunAndOpen(ctx context.Context, opts Options) (Report, *gitstore.Store, error) {
	r, err := newRunner(opts)
	if err != nil {
		return Report{}, nil, err
	}
	if _, err := os.Stat(filepath.Join(r.home, ConfigDir, ".git")); errors.Is(err, fs.ErrNotExist) {
		r.add(Finding{Kind: KindNotInstalled, Path: ConfigDir, Action: "none",
			Detail: "no config repository", Remedy: "start the server once to install the home"})
		return r.report, nil, nil
	}
	steps := []func(context.Context) error{r.temps, r.gitLocks, r.staleState, r.checkpoints, r.dirs, r.config}
	for _, step := range steps {
		err := ctx.Err()
		if err == nil {
			err = step(ctx)
		}
		if err != nil {
			if r.store != nil {
				err = errors.Join(err, r.store.Close())
			}
			return r.report, nil, err
		}
	}
	return r.report, r.store, nil
}

// MoveStaleState is Run's stale-state step alone, for a caller that takes
// the home's lock without starting a server, such as lifecycle.OpenHome
// for an operator tool: it moves the state file of a server that is not
// running to backups/, its bearer token redacted, as Run does, and leaves
// a live server's and this process's own. Call it while holding the
// home's writer lock; with opts.DryRun it only looks. Of opts it uses
// Home, DryRun and Logger.
func MoveStaleState(opts Options) (Report, error) {
	r, err := newRunner(opts)
	if err != nil {
		return Report{}, err
	}
	err = r.staleState(context.Background())
	return r.report, err
}

// newRunner returns the runner of one recovery of opts.Home, made
// absolute, with a report to fill and a logger that discards when
// opts.Logger is nil.
func newRunner(opts Options) (*runner, error) {
	if opts.Home == "" {
		return nil, errors.New("recovery: Options.Home is empty")
	}
	home, err := filepath.Abs(opts.Home)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &runner{opts: opts, home: home, log: log, report: Report{Home: home, DryRun: opts.DryRun}}, nil
}

func (r *runner) add(f Finding) {
	if r.opts.DryRun && f.Action != "none" && !strings.HasPrefix(f.Action, "would ") {
		f.Action = "would be " + f.Action
	}
	args := []any{"kind", f.Kind, "path", f.Path, "action", f.Action, "detail", f.Detail}
	if f.Remedy != "" {
		args = append(args, "remedy", f.Remedy)
	}
	r.log.Warn("recovery", args...)
	r.report.Findings = append(r.report.Findings, f)
}

func (r *runner) rel(abs string) string {
	rel, err := filepath.Rel(r.home, abs)
	if err != nil {
		return abs
	}
	return filepath.ToSlash(rel)
}

// temps removes the temporary files a crash left anywhere in the home,
// except inside the config repository's .git (gitstore cleans its own).
// Copies of config/ in backups/ have a .git too: their temporaries, go-git's
// included, are removed here.
func (r *runner) temps(context.Context) error {
	configGit := filepath.Join(r.home, ConfigDir, ".git")
	return filepath.WalkDir(r.home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// config/.git is gitstore's to clean; and no temporary file is
			// made in the fan-out directories of loose objects (gitstore
			// makes those in objects/), which in the copies of config/ in
			// backups/ would be up to 256 directories each to list at every
			// start.
			if p == configGit || isFanOut(p) {
				return filepath.SkipDir
			}
			return nil
		}
		inGit := slices.Contains(strings.Split(filepath.ToSlash(r.rel(p)), "/"), ".git")
		if !d.Type().IsRegular() || !(atomicfile.IsTemp(d.Name()) || (inGit && gitstore.IsTemp(d.Name()))) {
			return nil
		}
		r.add(Finding{Kind: KindOrphanTemp, Path: r.rel(p), Action: "removed",
			Detail: "temporary file of a write a crash interrupted; the target kept its old bytes"})
		if r.opts.DryRun {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(filepath.Dir(p))
	})
}

// isFanOut reports whether dir is a fan-out directory of loose objects:
// .git/objects/ and two hex digits.
func isFanOut(dir string) bool {
	parent := filepath.Dir(dir)
	return gitstore.IsFanOut(filepath.Base(dir)) &&
		filepath.Base(parent) == "objects" && filepath.Base(filepath.Dir(parent)) == ".git"
}

// gitLocks removes the *.lock files in the config repository: stale,
// because the caller holds the home lock, so no git writer runs.
func (r *runner) gitLocks(context.Context) error {
	gitDir := filepath.Join(r.home, ConfigDir, ".git")
	return filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "objects" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".lock") {
			return nil
		}
		r.add(Finding{Kind: KindStaleGitLock, Path: r.rel(p), Action: "removed",
			Detail: "git lock left by a crash; no git writer runs while the home is locked"})
		if r.opts.DryRun {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(filepath.Dir(p))
	})
}

// staleState moves aside the state file of a server that is not running.
// The copy in backups/ has its bearer token redacted, and only the newest
// keepStaleStates copies are kept (see the package documentation).
func (r *runner) staleState(context.Context) error {
	path := filepath.Join(r.home, statefile.FileName)
	s, err := statefile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	detail := ""
	switch {
	case err != nil:
		detail = "unreadable: " + problem(err)
	case s.Ours():
		return nil
	case s.Alive():
		return nil // a live server's (doctor beside it): not ours to touch
	case s.StartTime == 0:
		detail = fmt.Sprintf("no process start time, so no proof that pid %d is the server that wrote it", s.PID)
	default:
		detail = fmt.Sprintf("pid %d is not running: the server died without cleaning up", s.PID)
	}
	// Not through a link, and not waiting on a pipe: anything but a
	// regular file is moved aside as it is.
	raw, err := atomicfile.Reader{MaxSize: -1}.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, atomicfile.ErrNotRegular) {
		return err
	}
	redacted := redactToken(raw)
	secret := ""
	if !bytes.Equal(redacted, raw) {
		secret = " with its bearer token redacted"
	}
	f := Finding{Kind: KindStaleState, Path: statefile.FileName, Action: "moved to " + BackupsDir + "/" + secret, Detail: detail}
	if !r.opts.DryRun {
		var dst string
		if secret == "" {
			dst, err = r.quarantine(path, "stale")
		} else {
			dst, err = r.replaceInBackups(path, "stale", redacted)
		}
		if err != nil {
			return err
		}
		f.Action = "moved to " + r.rel(dst) + secret
		removed, err := r.pruneStaleStates(dst)
		if err != nil {
			return err
		}
		if len(removed) > 0 {
			f.Action += fmt.Sprintf("; removed the oldest stale state copies, keeping %d: %s", keepStaleStates, strings.Join(removed, ", "))
		}
	}
	r.add(f)
	return nil
}

// keepStaleStates is how many copies of dead servers' state files
// backups/ keeps.
const keepStaleStates = 5

// token matches the value of a state file's bearer token, even in a torn
// file.
var token = regexp.MustCompile(`("token"\s*:\s*")[^"]+`)

// redactToken returns the bytes of a state file with the bearer token's
// value replaced by "redacted".
func redactToken(b []byte) []byte {
	return token.ReplaceAll(b, []byte("${1}redacted"))
}

// pruneStaleStates removes the oldest copies of state files in backups/
// but keep, so that keepStaleStates are left, and returns their paths
// relative to the home. Copies are named by the time they were made.
func (r *runner) pruneStaleStates(keep string) ([]string, error) {
	backups := filepath.Join(r.home, BackupsDir)
	// Not a glob of the path: a home's path may hold a pattern's
	// metacharacters (a [), which only the names are matched without.
	entries, err := os.ReadDir(backups)
	if err != nil {
		return nil, err
	}
	var copies []string
	for _, e := range entries {
		if ok, _ := filepath.Match("stale-*-"+statefile.FileName+"*", e.Name()); ok {
			copies = append(copies, filepath.Join(backups, e.Name()))
		}
	}
	copies = slices.DeleteFunc(copies, func(p string) bool { return p == keep })
	slices.Sort(copies)
	var removed []string
	for len(copies) > keepStaleStates-1 {
		if err := os.Remove(copies[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, r.rel(copies[0]))
		copies = copies[1:]
	}
	if len(removed) == 0 {
		return nil, nil
	}
	return removed, atomicfile.SyncDir(backups)
}

// backupName returns a new, timestamped name in backups/ for the file at
// abs.
func (r *runner) backupName(abs, prefix string) (string, error) {
	backups := filepath.Join(r.home, BackupsDir)
	if err := atomicfile.MkdirAll(backups, 0o700); err != nil {
		return "", err
	}
	head := prefix + "-" + time.Now().UTC().Format("20060102T150405.000000000Z") + "-"
	base := filepath.Join(backups, head+backupTail(r.rel(abs), maxBackupName-len(head)))
	dst := base
	for i := 2; ; i++ {
		_, err := os.Lstat(dst)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return dst, nil
		case err != nil:
			return "", err // not "taken": trying the next name would loop for ever
		}
		dst = fmt.Sprintf("%s-%d", base, i)
	}
}

// maxBackupName is the longest name backupName gives: 255, the longest
// name the file systems of Linux and macOS take, less room for the "-N"
// that tells two backups of one second apart.
const maxBackupName = 255 - 4

// backupTail is rel (a path relative to the home) as the end of a backup's
// name, "/" made "_", at most max bytes: one too long (deep directories, a
// long name) keeps its end, where the file's name is, after a hash of the
// whole path that tells two such paths apart.
func backupTail(rel string, max int) string {
	flat := strings.ReplaceAll(rel, "/", "_")
	if len(flat) <= max {
		return flat
	}
	sum := sha256.Sum256([]byte(rel))
	tag := hex.EncodeToString(sum[:4]) + "-"
	tail := flat[len(flat)-(max-len(tag)):]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:] // start at a whole character
	}
	return tag + tail
}

// quarantine moves the file at abs into backups/ under a new, timestamped
// name and returns that name. The bytes are kept as they are.
func (r *runner) quarantine(abs, prefix string) (string, error) {
	dst, err := r.backupName(abs, prefix)
	if err != nil {
		return "", err
	}
	if err := os.Rename(abs, dst); err != nil {
		return "", err
	}
	if err := atomicfile.SyncDir(filepath.Dir(dst)); err != nil {
		return "", err
	}
	return dst, atomicfile.SyncDir(filepath.Dir(abs))
}

// replaceInBackups writes data into backups/ under a new, timestamped name
// for the file at abs, durably, then removes that file, and returns the
// name. A crash in between leaves both, and the next Run does it again.
func (r *runner) replaceInBackups(abs, prefix string, data []byte) (string, error) {
	dst, err := r.backupName(abs, prefix)
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(dst, data, 0o600); err != nil {
		return "", err
	}
	if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return dst, atomicfile.SyncDir(filepath.Dir(abs))
}

// checkpoints rolls back every update that began and did not finish,
// newest first: when two were open on one file, the older one's pre-image
// is the file as it was before either, and it must be written last.
// Checkpoints are named by the time Begin made them, so the newest sorts
// last.
func (r *runner) checkpoints(context.Context) error {
	dir := filepath.Join(r.home, CheckpointsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	slices.Reverse(entries)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		cdir := filepath.Join(dir, e.Name())
		var m manifest
		err := atomicfile.ReadJSONStrict(filepath.Join(cdir, manifestName), &m)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Begin never finished: nothing was written under it.
			r.add(Finding{Kind: KindInterrupted, Path: r.rel(cdir), Action: "removed",
				Detail: "a checkpoint that was never completed; no file had been changed under it"})
		case err != nil:
			r.add(Finding{Kind: KindInterrupted, Path: r.rel(cdir), Action: "none", Detail: problem(err), NeedsUser: true,
				Remedy: "compare the pre-images in " + r.rel(cdir) + " with the files they name, then remove the directory"})
			continue
		default:
			paths := make([]string, len(m.Files))
			for i, f := range m.Files {
				paths[i] = f.Path
			}
			r.add(Finding{Kind: KindInterrupted, Path: r.rel(cdir), Action: "rolled back " + strings.Join(paths, ", "),
				Detail: fmt.Sprintf("update %q was interrupted by a crash before it finished", m.Op)})
			if !r.opts.DryRun {
				if err := restore(r.home, cdir, m); err != nil {
					return err
				}
				r.undone = append(r.undone, undone{op: m.Op, paths: paths})
			}
		}
		if r.opts.DryRun {
			continue
		}
		if err := os.Remove(filepath.Join(cdir, manifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.RemoveAll(cdir); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// dirs recreates the home's directories.
func (r *runner) dirs(context.Context) error {
	for _, d := range []string{CheckpointsDir, BackupsDir} {
		p := filepath.Join(r.home, d)
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		r.add(Finding{Kind: KindMissingDir, Path: d, Action: "created"})
		if !r.opts.DryRun {
			if err := atomicfile.MkdirAll(p, 0o700); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *runner) gitOptions() *gitstore.Options {
	var o gitstore.Options
	if r.opts.Git != nil {
		o = *r.opts.Git
	}
	o.HoldsLock, o.ReadOnly = !r.opts.DryRun, r.opts.DryRun
	if o.MaxFileSize == 0 {
		o.MaxFileSize = r.opts.MaxFileSize
	}
	if o.Logger == nil {
		o.Logger = r.log
	}
	return &o
}

// config repairs the repository, restores corrupt files and commits what a
// crash left uncommitted.
func (r *runner) config(ctx context.Context) error {
	configDir := filepath.Join(r.home, ConfigDir)
	store, err := gitstore.Open(configDir, r.gitOptions())
	if err != nil {
		r.add(Finding{Kind: KindGitRepair, Path: ConfigDir, Action: "none", Detail: err.Error(), NeedsUser: true,
			Remedy: "the config repository cannot be opened; restore " + ConfigDir + " from " + BackupsDir + "/ or reinstall"})
		return nil
	}
	r.store = store // RunAndOpen's caller, or Run, closes it
	r.repairs(store)
	if err := r.conflicts(store, configDir); err != nil {
		return err
	}
	if err := r.checkFiles(store, configDir); err != nil {
		return err
	}
	if r.unreadable > 0 || r.refused > 0 && r.opts.DryRun {
		// A commit needs every file of the tree; each unreadable one is
		// a finding that says so, and so is each one a dry run left in
		// place that a commit refuses.
		return nil
	}
	dirty, err := store.Dirty()
	if err != nil {
		return err
	}
	if !dirty {
		return nil
	}
	f := Finding{Kind: KindUncommitted, Path: ConfigDir, Action: "committed",
		Detail: "changes no commit recorded, left by a crash or made by hand"}
	if r.opts.DryRun && slices.ContainsFunc(store.Repairs(), isRollForward) {
		// A read-only store does not put the files in place: they differ
		// from HEAD now, and may be all the changes there are.
		f.Action = "would be committed, unless the roll-forward above puts them all in place"
	}
	if !r.opts.DryRun {
		hash, err := store.Commit(r.commitMessage(store))
		if err != nil {
			return err
		}
		f.Action = "committed as " + shortHash(hash)
	}
	r.add(f)
	return nil
}

// repairs adds a finding for each of the repairs opening store made, or
// in a dry run would make, to the config repository.
func (r *runner) repairs(store *gitstore.Store) {
	for _, msg := range store.Repairs() {
		r.add(Finding{Kind: KindGitRepair, Path: ConfigDir + "/.git", Action: r.repairAction(msg), Detail: "left by a crash or another tool"})
	}
}

// isRollForward reports whether msg, one of gitstore's repairs, is the
// roll-forward of a change a crash interrupted before its files were in
// place, which writes them.
func isRollForward(msg string) bool {
	return strings.HasPrefix(strings.TrimPrefix(msg, "would be "), "rolled forward ")
}

// checkFiles checks each config file in configDir (checkFile).
func (r *runner) checkFiles(store *gitstore.Store, configDir string) error {
	files, err := configFiles(configDir)
	if err != nil {
		return err
	}
	for _, rel := range files {
		if err := r.checkFile(store, configDir, rel); err != nil {
			return err
		}
	}
	return nil
}

// conflicts adds a finding for each file a merge from the git remote
// kept one version of (this home's, or the remote's in sync mode) while
// both changed it, the other in a tag, and for
// each entry of the remote it refused: each conflicts/<time> tag that no
// one has resolved yet (gitstore.Store.Conflicts).
func (r *runner) conflicts(store *gitstore.Store, configDir string) error {
	conflicts, err := store.Conflicts()
	if err != nil {
		r.log.Warn("recovery: could not list the conflicts of merges from the git remote", "err", err)
		return nil
	}
	resolve := func(c gitstore.Conflict) string { return "then run `mcpkeep sync --resolve " + c.Tag + "`" }
	for _, c := range conflicts {
		kept, other := "this home's", "the remote's"
		if c.Kept == gitstore.KeptRemote {
			kept, other = other, "this home's"
		}
		for _, f := range c.Files {
			r.add(Finding{Kind: KindMergeConflict, Path: ConfigDir + "/" + f, Action: "none", NeedsUser: true,
				Detail: fmt.Sprintf("changed here and on the git remote: the merge of %s kept %s version; %s is in tag %s",
					shortHash(c.Remote), kept, other, c.Tag),
				Remedy: fmt.Sprintf("compare the two (git -C %s diff %s -- %s), make the file what it should be, ", configDir, c.Tag, f) + resolve(c)})
		}
		for _, f := range c.Refused {
			path, what := f, ""
			if i := strings.LastIndex(f, " ("); i >= 0 {
				path, what = f[:i], f[i+2:]
			}
			r.add(Finding{Kind: KindMergeConflict, Path: ConfigDir + "/" + path, Action: "none", NeedsUser: true,
				Detail: fmt.Sprintf("the git remote's %s is %s, which this home does not take (tag %s): its own version was kept",
					path, strings.TrimSuffix(what, ")"), c.Tag),
				Remedy: "remove or replace that entry on the remote, " + resolve(c)})
		}
	}
	return nil
}

// commitMessage says, for a person reading `git log`, what the commit of
// the changes no commit recorded is: an interrupted update undone (and
// which commit it undoes, when the update had committed before the
// crash), or changes made by hand or by a crash outside any update.
func (r *runner) commitMessage(store *gitstore.Store) string {
	const other = "Any other change no commit recorded, such as a hand edit, is in this commit too."
	if len(r.undone) == 0 {
		return "recovered: commit changes made by hand, or left uncommitted by a crash"
	}
	head, _ := store.History("", 1)
	var lines []string
	title := ""
	for _, u := range r.undone {
		files := strings.Join(u.paths, ", ")
		if len(head) == 1 && strings.SplitN(head[0].Message, "\n", 2)[0] == u.op && title == "" {
			h := shortHash(head[0].Hash)
			title = fmt.Sprintf("recovered: undo %q (%s), cut short by a crash", u.op, h)
			lines = append(lines, fmt.Sprintf("Commit %s, %q, was made, but the server crashed before the update "+
				"finished, so its client had no answer. Its files are put back as they were before it: %s. "+
				"The client may send it again.", h, u.op, files))
			continue
		}
		lines = append(lines, fmt.Sprintf("Update %q was cut short by a crash before its commit; its files are "+
			"put back as they were before it: %s.", u.op, files))
	}
	if title == "" {
		title = "recovered: commit changes made by hand, or left uncommitted by a crash"
	}
	return title + "\n\n" + strings.Join(append(lines, other), "\n")
}

// repairVerbs turn the past tense of gitstore's repairs into what a dry
// run would do.
var repairVerbs = map[string]string{"removed": "remove", "rewrote": "rewrite", "wrote": "write", "restored": "restore", "rebuilt": "rebuild",
	"rolled": "roll", "ignored": "ignore"}

// repairAction words one of gitstore's repairs as a finding's action: as
// it is, or, in a dry run, as what Run would do ("would rewrite …", not
// "would be rewrote …").
func (r *runner) repairAction(msg string) string {
	msg = strings.TrimPrefix(msg, "would be ")
	if !r.opts.DryRun {
		return msg
	}
	verb, rest, _ := strings.Cut(msg, " ")
	if now, ok := repairVerbs[verb]; ok {
		return "would " + now + " " + rest
	}
	return "would repair: " + msg
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// parse checks one config file's bytes: syntax by extension, then Validate.
func (r *runner) parse(rel string, data []byte) error {
	return CheckConfig(rel, data, r.opts.Validate)
}

// checkFile quarantines a config file that does not parse, or an entry
// that is not a regular file or is too large, and restores its newest good
// version from history (or the default, when allowed).
func (r *runner) checkFile(store *gitstore.Store, configDir, rel string) error {
	abs := filepath.Join(configDir, filepath.FromSlash(rel))
	data, err := atomicfile.Reader{Root: configDir, MaxSize: r.opts.MaxFileSize}.ReadFile(abs)
	var refused *atomicfile.RefusedError
	switch {
	case errors.As(err, &refused):
		r.refused++
	case err != nil:
		r.unreadable++
		r.add(Finding{Kind: KindUnreadableFile, Path: r.rel(abs), Action: "none", Detail: err.Error(), NeedsUser: true,
			Remedy: "fix the file's permissions or owner so the server can read it; until then changes to " + ConfigDir + "/ are not committed"})
		return nil
	}
	var perr error
	if refused == nil {
		if perr = r.parse(rel, data); perr == nil {
			return nil
		}
	}
	good, from := r.lastGood(store, rel)
	if good == nil && r.opts.AllowDefaults && r.opts.Defaults != nil {
		if d, err := fs.ReadFile(r.opts.Defaults, rel); err == nil && r.parse(rel, d) == nil {
			good, from = d, "the default"
		}
	}
	f := Finding{Kind: KindCorruptConfig, Path: r.rel(abs)}
	if refused != nil {
		f.Kind, f.Detail = KindRefusedFile, r.refusal(abs, refused)
	} else {
		f.Detail = problem(perr)
	}
	if good == nil {
		f.Action, f.NeedsUser = "quarantined to "+BackupsDir+"/", true
		f.Remedy = "no good version in history: fix the copy in " + BackupsDir + "/ and put it back, then commit"
		if refused != nil {
			f.Remedy = "no good version in history: if a config file belongs there, put a regular file " +
				"of at most " + maxSize(r.opts.MaxFileSize) + " in its place (config files are never read through a link), then commit"
		}
	} else {
		f.Action = "quarantined to " + BackupsDir + "/ and restored from " + from
		if refused != nil {
			f.Remedy = "nothing to do: what was there is kept in " + BackupsDir + "/; " +
				"config files are read only as regular files of at most " + maxSize(r.opts.MaxFileSize) + ", never through a link"
		}
	}
	if !r.opts.DryRun {
		// A link is moved as a link: rename never follows it.
		prefix := "corrupt"
		if refused != nil {
			prefix = "refused"
		}
		dst, err := r.quarantine(abs, prefix)
		if err != nil {
			return err
		}
		f.Action = strings.Replace(f.Action, BackupsDir+"/", r.rel(dst), 1)
		if good != nil {
			if err := atomicfile.WriteFile(abs, good, 0o600); err != nil {
				return err
			}
		}
	}
	r.add(f)
	return nil
}

// refusal is a Finding's Detail for an entry the read refused: what it is,
// where a link points (the link's own bytes, never its target's), or the
// size.
func (r *runner) refusal(abs string, re *atomicfile.RefusedError) string {
	if re.Mode.Type() == 0 {
		return fmt.Sprintf("%d bytes, more than the %d a config file may have", re.Size, re.Limit)
	}
	what := re.Kind()
	if re.Path != abs {
		what = r.rel(re.Path) + " is " + what // a linked directory above it
	}
	if re.Mode.Type()&fs.ModeSymlink != 0 {
		if target, err := os.Readlink(re.Path); err == nil {
			what += " to " + strconv.Quote(target)
		}
		return what + ", not a regular file (links are never followed)"
	}
	if re.Mode.IsDir() {
		return what + " where a config file belongs"
	}
	return what + ", not a regular file"
}

// maxSize words the size limit limit (0 for the default) for a remedy.
func maxSize(limit int64) string {
	switch {
	case limit == 0:
		limit = atomicfile.DefaultMaxSize
	case limit < 0:
		return "any size"
	}
	if limit%(1<<20) == 0 {
		return strconv.FormatInt(limit>>20, 10) + " MiB"
	}
	return strconv.FormatInt(limit, 10) + " bytes"
}

// lastGood returns the newest committed version of rel that parses, and
// the commit it came from.
func (r *runner) lastGood(store *gitstore.Store, rel string) ([]byte, string) {
	commits, err := store.History(rel, 0)
	if err != nil {
		return nil, ""
	}
	for _, c := range commits {
		data, err := store.ReadAt(c.Hash, rel)
		if err == nil && r.parse(rel, data) == nil {
			return data, "commit " + shortHash(c.Hash)
		}
	}
	return nil, ""
}

// configFiles lists what checkFile checks in the config work tree,
// relative and slash-separated, without .git, sorted: every entry that is
// not a directory (regular files, and links, pipes, sockets and devices,
// which it quarantines), and every directory named like a config file
// (*.yaml, *.yml, *.json), which it quarantines too, whole. A link to a
// directory is listed, not followed.
func configFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() && !isConfigName(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

// isConfigName reports whether name is a config file's: *.yaml, *.yml or
// *.json.
func isConfigName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// problem is err's text for a Finding's Detail. A *atomicfile.CorruptError
// gives its Problem, without the remedy it would carry to a person: the
// Finding's Action and Remedy say what is done, or to do, about the file.
func problem(err error) string {
	var ce *atomicfile.CorruptError
	if errors.As(err, &ce) {
		return strings.Replace(err.Error(), ce.Error(), ce.Problem(), 1)
	}
	return err.Error()
}
