package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// upgrading is the .upgrading journal: it exists from the moment config/ is
// backed up until the new stamp is written, so an upgrade interrupted by a
// crash is undone from the backup at the next Ensure.
type upgrading struct {
	Backup   string `json:"backup"` // relative to the home
	From, To int
}

// chain returns the migrations from schema from to the current schema.
func (e *ensurer) chain(from int) ([]Migration, error) {
	var out []Migration
	for cur := from; cur != e.spec.Schema; {
		next := -1
		for i, m := range e.spec.Migrations {
			if m.From == cur && m.To > cur && m.To <= e.spec.Schema {
				next = i
				break
			}
		}
		if next < 0 {
			return nil, e.noMigration(cur)
		}
		out = append(out, e.spec.Migrations[next])
		cur = e.spec.Migrations[next].To
	}
	return out, nil
}

// noMigration is chain's *SpecError for a home at schema from that no
// migration takes further: it names the migration to add, from there to
// the schema the next migration starts at, or to the current one. (Once a
// migration applies, Spec.check has made sure the chain reaches Schema.)
func (e *ensurer) noMigration(from int) error {
	to := e.spec.Schema
	for _, m := range e.spec.Migrations {
		if m.From > from && m.From < to {
			to = m.From
		}
	}
	return &SpecError{Field: "Migrations", Problem: fmt.Sprintf("has no migration from schema %d, the schema of the home %s, toward Spec.Schema %d: "+
		"add a bootstrap.Migration{From: %d, To: %d, Apply: ...} that moves the home's files from schema %d to %d, or keep Spec.Schema at %d; "+
		"the home is left as it was", from, e.spec.Home, e.spec.Schema, from, to, from, to, from)}
}

// upgrade backs up config/, runs the migrations from schema from, validates
// and commits. On failure config/ is restored from the backup.
func (e *ensurer) upgrade(ctx context.Context, from int) (string, error) {
	chain, err := e.chain(from)
	if err != nil {
		return "", err
	}
	if err := e.makeDirs(); err != nil {
		return "", err
	}
	if err := e.removePartialBackups(); err != nil {
		return "", err
	}
	// The backup is copied under a .partial name and renamed when whole,
	// so a crash during the copy never leaves what looks like a backup.
	rel := filepath.Join(BackupsDir, fmt.Sprintf("upgrade-v%d-%s", from, time.Now().UTC().Format("20060102T150405.000000000Z")))
	abs := filepath.Join(e.spec.Home, rel)
	if err := copyTree(e.config, abs+partialSuffix); err != nil {
		return "", fmt.Errorf("bootstrap: back up %s before upgrading: %w", e.config, err)
	}
	if err := os.Rename(abs+partialSuffix, abs); err != nil {
		return "", fmt.Errorf("bootstrap: back up %s before upgrading: %w", e.config, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(abs)); err != nil {
		return "", err
	}
	j := upgrading{Backup: rel, From: from, To: e.spec.Schema}
	if err := atomicfile.WriteJSON(filepath.Join(e.spec.Home, upgradingFile), j, 0o600); err != nil {
		return "", err
	}
	fail := func(name string, m Migration, err error) (string, error) {
		mErr := &MigrationError{Migration: name, From: m.From, To: m.To, Err: err}
		if rerr := e.restore(j); rerr != nil {
			return "", errors.Join(mErr, fmt.Errorf("restore %s from %s: %w", e.config, rel, rerr))
		}
		return "", mErr
	}
	if err := failpoint.Hit("bootstrap.before-migration"); err != nil {
		return fail("before-migration", Migration{From: from, To: e.spec.Schema}, err)
	}
	for _, m := range chain {
		if err := ctx.Err(); err != nil {
			return fail(m.Name, m, err)
		}
		e.log.Info("migrating config", "name", m.Name, "from", m.From, "to", m.To)
		if err := m.Apply(ctx, e.config); err != nil {
			return fail(m.Name, m, err)
		}
	}
	if err := failpoint.Hit("bootstrap.after-migration"); err != nil {
		return fail("after-migration", Migration{From: from, To: e.spec.Schema}, err)
	}
	whole := Migration{From: from, To: e.spec.Schema}
	if e.spec.Validate != nil {
		if err := e.spec.Validate(e.config); err != nil {
			return fail("validate", whole, err)
		}
	}
	store, err := gitstore.Open(e.config, e.gitOptions())
	if err != nil {
		return fail("commit", whole, err)
	}
	defer store.Close()
	hash, err := store.Commit(fmt.Sprintf("migrate v%d→v%d", from, e.spec.Schema))
	if err != nil {
		return fail("commit", whole, err)
	}
	return hash, nil
}

// partialSuffix marks an upgrade backup still being copied.
const partialSuffix = ".partial"

// removePartialBackups removes the upgrade backups a crash interrupted
// while they were being copied. Each is an incomplete copy of config/,
// which the upgrade had not touched yet: nothing in it is lost.
func (e *ensurer) removePartialBackups() error {
	backups := filepath.Join(e.spec.Home, BackupsDir)
	partial, err := matching(backups, "upgrade-v*"+partialSuffix)
	if err != nil {
		return err
	}
	for _, p := range partial {
		e.log.Warn("removing an upgrade backup a crash interrupted; config/ was not yet changed", "path", p)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if len(partial) == 0 {
		return nil
	}
	return atomicfile.SyncDir(backups)
}

// matching returns the paths of the entries of dir whose names match
// pattern, as filepath.Glob(filepath.Join(dir, pattern)) would if dir were
// taken as it is: a home's path may hold a pattern's metacharacters (a
// home named "h[1"), which only names are matched without. A missing dir
// holds none.
func matching(dir, pattern string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if ok, err := filepath.Match(pattern, e.Name()); err != nil {
			return nil, err
		} else if ok {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}

// restore puts config/ back as it was in the backup j names. The config/
// being replaced is moved into backups/, not deleted.
//
// Once config/ is back, the backup is removed: config/ holds the same
// bytes, and a server respawned for every client retries a failing
// upgrade at every start, each time with a new backup. For the same
// reason only the newest copy of a failed config/ is kept for each pair
// of schemas: the older ones are earlier runs of the same migrations on
// the same files.
func (e *ensurer) restore(j upgrading) error {
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	backups := filepath.Join(e.spec.Home, BackupsDir)
	prefix := fmt.Sprintf("failed-upgrade-v%d-v%d-", j.From, j.To)
	aside := filepath.Join(backups, prefix+stamp)
	if err := os.Rename(e.config, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(e.spec.Home); err != nil {
		return err
	}
	backup := filepath.Join(e.spec.Home, j.Backup)
	if err := copyTree(backup, e.config); err != nil {
		return err
	}
	// The journal goes first: until it is gone, a crash restores again,
	// from the backup.
	if err := e.endUpgrade(); err != nil {
		return err
	}
	redundant, _ := matching(backups, prefix+"*")
	if filepath.Dir(backup) == backups && strings.HasPrefix(filepath.Base(backup), "upgrade-v") {
		redundant = append(redundant, backup)
	}
	for _, dir := range redundant {
		if dir == aside {
			continue
		}
		// Housekeeping: config/ is restored whatever happens here.
		e.log.Info("removing a redundant copy of config/ left by a failed upgrade", "path", dir)
		if err := os.RemoveAll(dir); err != nil {
			e.log.Warn("could not remove a redundant copy of config/", "path", dir, "err", err)
		}
	}
	if err := atomicfile.SyncDir(backups); err != nil {
		e.log.Warn("could not sync", "path", backups, "err", err)
	}
	return nil
}

// finishUpgradeRestore undoes an upgrade a crash interrupted: if the
// journal exists and the stamp does not yet name the new schema, config/ is
// restored from the backup before anything else looks at it.
func (e *ensurer) finishUpgradeRestore() error {
	var j upgrading
	err := atomicfile.ReadJSON(filepath.Join(e.spec.Home, upgradingFile), &j)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := checkServer(e.spec.Home, e.spec.Server); err != nil {
		return err // another server's upgrade is that server's to finish
	}
	if st, err := readStamp(e.spec.Home); err == nil && st.Schema == j.To {
		return e.endUpgrade() // the upgrade finished; only the journal was left
	}
	e.log.Warn("an upgrade was interrupted; restoring config from its backup", "backup", j.Backup)
	return e.restore(j)
}

func (e *ensurer) endUpgrade() error {
	err := os.Remove(filepath.Join(e.spec.Home, upgradingFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return atomicfile.SyncDir(e.spec.Home)
}

// copyTree durably copies the directory src to dst (which must not hold
// other files), keeping modes and symbolic links.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return atomicfile.MkdirAll(target, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return atomicfile.WriteFile(target, data, info.Mode().Perm())
		}
		return nil // sockets and devices have no place in config
	})
}
