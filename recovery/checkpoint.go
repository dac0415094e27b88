package recovery

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// CheckpointsDir is the journal directory inside a home.
const CheckpointsDir = "checkpoints"

const manifestName = "manifest.json"

// manifest is the commit record of a checkpoint: it is written after every
// pre-image, so its presence means the update may have started.
type manifest struct {
	Op      string     `json:"op"`
	Created time.Time  `json:"created"`
	Files   []preimage `json:"files"`
}

type preimage struct {
	Path   string      `json:"path"`             // relative to the home, slash-separated
	Absent bool        `json:"absent,omitempty"` // the file did not exist: roll back by removing it
	Mode   fs.FileMode `json:"mode,omitempty"`
	Saved  string      `json:"saved,omitempty"` // name of the saved copy inside the checkpoint
}

// Checkpoint is an update in progress: the pre-images of the files it may
// change, saved durably so Run can put them back after a crash. Begin one
// before writing, call Done once every write (and the commit) is durable.
type Checkpoint struct {
	home, dir string
	m         manifest
	closed    bool
}

// Begin saves the current bytes of paths (absolute, or relative to home)
// into <home>/checkpoints/ durably and returns the open checkpoint. A path
// that does not exist yet is recorded as absent. Until Done, a crash means
// the next Run restores every path to what Begin saw: a multi-file update is
// all-or-nothing. When Begin fails it removes what it wrote. Begin does not
// lock; the home's single writer calls it.
func Begin(home, op string, paths ...string) (_ *Checkpoint, err error) {
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	name := time.Now().UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(id)
	c := &Checkpoint{home: home, dir: filepath.Join(home, CheckpointsDir, name), m: manifest{Op: op, Created: time.Now().UTC()}}
	if err := atomicfile.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		// Without its manifest the checkpoint changes nothing: a server that
		// goes on serving after a full disk must not keep it until the
		// next start.
		if err != nil {
			os.RemoveAll(c.dir)
		}
	}()
	for i, p := range paths {
		rel, abs, err := relPath(home, p)
		if err != nil {
			return nil, err
		}
		pre := preimage{Path: rel}
		// Not through a link, nor waiting on a pipe: such an entry is
		// refused, and the update with it.
		data, err := atomicfile.Reader{MaxSize: -1}.ReadFile(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			pre.Absent = true
		case err != nil:
			return nil, fmt.Errorf("checkpoint %q: %w", op, err)
		default:
			fi, err := os.Stat(abs)
			if err != nil {
				return nil, err
			}
			pre.Mode, pre.Saved = fi.Mode().Perm(), strconv.Itoa(i)
			if err := atomicfile.WriteFile(filepath.Join(c.dir, pre.Saved), data, 0o600); err != nil {
				return nil, err
			}
		}
		c.m.Files = append(c.m.Files, pre)
		if i == 0 {
			if err := failpoint.Hit("recovery.begin-after-preimage"); err != nil {
				return nil, err
			}
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(c.dir, manifestName), c.m, 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// relPath returns p relative to home (slash-separated) and absolute, and
// refuses paths outside the home.
func relPath(home, p string) (rel, abs string, err error) {
	abs = p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(home, p)
	}
	r, err := filepath.Rel(home, abs)
	if err != nil || r == "." || r == ".." || filepath.IsAbs(r) || (len(r) > 2 && r[:3] == ".."+string(filepath.Separator)) {
		return "", "", fmt.Errorf("checkpoint path %s is not inside home %s", p, home)
	}
	return filepath.ToSlash(r), abs, nil
}

// Done closes the checkpoint: the update is durable and must not be rolled
// back. Removing the manifest is the commit point.
func (c *Checkpoint) Done() error {
	if c.closed {
		return nil
	}
	if err := failpoint.Hit("recovery.before-done"); err != nil {
		return err
	}
	return c.remove()
}

// Rollback puts every path back as Begin saw it, now, and closes the
// checkpoint: for an update whose write or commit failed. It is idempotent.
func (c *Checkpoint) Rollback() error {
	if c.closed {
		return nil
	}
	if err := restore(c.home, c.dir, c.m); err != nil {
		return err
	}
	return c.remove()
}

func (c *Checkpoint) remove() error {
	if err := os.Remove(filepath.Join(c.dir, manifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(c.dir); err != nil {
		return err
	}
	c.closed = true
	if err := os.RemoveAll(c.dir); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(c.dir))
}

// restore writes every pre-image of m back into home.
func restore(home, dir string, m manifest) error {
	for i, pre := range m.Files {
		_, abs, err := relPath(home, filepath.FromSlash(pre.Path))
		if err != nil {
			return err
		}
		if err := restoreOne(abs, dir, pre); err != nil {
			return err
		}
		if i == 0 { // the first file is back, whether rewritten or removed
			if err := failpoint.Hit("recovery.during-rollback"); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreOne puts one pre-image back at abs: it removes a file the update
// created, or writes back the bytes it replaced.
func restoreOne(abs, dir string, pre preimage) error {
	if pre.Absent {
		if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := atomicfile.SyncDir(filepath.Dir(abs)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := os.ReadFile(filepath.Join(dir, pre.Saved))
	if err != nil {
		return fmt.Errorf("checkpoint %s: pre-image of %s: %w", dir, pre.Path, err)
	}
	if err := atomicfile.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(abs, data, pre.Mode)
}
