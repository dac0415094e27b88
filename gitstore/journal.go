package gitstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/barrier"
)

// The journal holds the batches Apply made durable and the repository does
// not hold yet (see DESIGN.md, "Issue 20: the change path"). It is two
// files in .git, made once: records are appended to the active one; a
// flush makes the other one active, writes the records of the first to
// the repository and then empties it. Each record is framed as
//
//	"mcpkjr01" | length of body (uint32, big-endian) | SHA-256 of body | body
//
// and the body is a journalRecord in JSON. A reader stops at the first
// frame that is short or does not check: a record is there whole or not
// at all.
const (
	journalPrefix = "mcpkeep-journal-"
	journalMagic  = "mcpkjr01"
	frameHeader   = len(journalMagic) + 4 + sha256.Size
	// maxRecord bounds a body a reader will allocate for: a frame that
	// claims more is garbage.
	maxRecord = 1 << 30
)

// journalRecord is one batch: commits built one on another from Base.
type journalRecord struct {
	Seq     uint64          `json:"seq"`
	Branch  string          `json:"branch"`
	Base    string          `json:"base,omitempty"` // the commit the batch built on; "" for none
	Commits []journalCommit `json:"commits"`
	Blobs   [][]byte        `json:"blobs,omitempty"` // every new blob's contents
}

// journalCommit is one commit of a batch: its object, and its tree given
// as edits of its parent's tree, from which Open builds the trees again.
type journalCommit struct {
	Object  []byte          `json:"object"` // the commit object's contents, as git encodes them
	Changes []journalChange `json:"changes"`
	// Forward marks a fast-forward to a commit fetched from a remote
	// (remote.go): a descendant of its parent in the batch, not a child,
	// and already in the repository.
	Forward bool `json:"forward,omitempty"`
}

// journalChange is one path of a commit: its new blob and mode, or its
// removal, and the permissions of its file in the work tree.
type journalChange struct {
	Path string `json:"path"`
	Blob string `json:"blob,omitempty"` // "" removes the path
	Mode uint32 `json:"mode,omitempty"` // the tree entry's git mode
	Perm uint32 `json:"perm,omitempty"` // the work tree file's permission bits
}

// encodeRecord frames r.
func encodeRecord(r *journalRecord) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	out := make([]byte, 0, frameHeader+len(body))
	out = append(out, journalMagic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	out = append(out, sum[:]...)
	return append(out, body...), nil
}

// decodeRecords returns the whole records at the start of data and the
// length of the bytes they take; what follows is torn or garbage.
func decodeRecords(data []byte) ([]*journalRecord, int) {
	var out []*journalRecord
	off := 0
	for len(data)-off >= frameHeader {
		h := data[off : off+frameHeader]
		if string(h[:len(journalMagic)]) != journalMagic {
			break
		}
		n := int(binary.BigEndian.Uint32(h[len(journalMagic):]))
		if n > maxRecord || len(data)-off-frameHeader < n {
			break
		}
		body := data[off+frameHeader : off+frameHeader+n]
		if sum := sha256.Sum256(body); !bytes.Equal(sum[:], h[len(journalMagic)+4:]) {
			break
		}
		var r journalRecord
		if err := json.Unmarshal(body, &r); err != nil {
			break
		}
		out = append(out, &r)
		off += frameHeader + n
	}
	return out, off
}

// journal is the writer's side of the two journal files.
type journal struct {
	paths  [2]string
	files  [2]*os.File
	sizes  [2]int64
	active int
	// broken is set when a failed append could not be undone: appending
	// after a torn record would hide every later one from Open.
	broken error
}

func journalPaths(gitDir string) [2]string {
	return [2]string{filepath.Join(gitDir, journalPrefix+"0"), filepath.Join(gitDir, journalPrefix+"1")}
}

// readJournal returns every whole record of the journal files of gitDir,
// in the order they were written, and the length of the whole records
// of each file.
func readJournal(gitDir string) ([]*journalRecord, [2]int, error) {
	var all []*journalRecord
	var lens [2]int
	for i, p := range journalPaths(gitDir) {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, lens, fmt.Errorf("gitstore: read the journal: %w", err)
		}
		recs, n := decodeRecords(data)
		lens[i] = n
		all = append(all, recs...)
	}
	slices.SortFunc(all, func(a, b *journalRecord) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return all, lens, nil
}

// openJournal opens (creating them durably the first time) both journal
// files of gitDir for writing, empty: the caller has written what they
// held to the repository.
func openJournal(gitDir string) (*journal, error) {
	j := &journal{paths: journalPaths(gitDir)}
	created := false
	for i, p := range j.paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			created = true
		}
		if err != nil {
			j.close()
			return nil, fmt.Errorf("gitstore: open the journal: %w", err)
		}
		j.files[i] = f
		fi, err := f.Stat()
		if err == nil && fi.Size() > 0 {
			err = f.Truncate(0)
		}
		if err != nil {
			j.close()
			return nil, fmt.Errorf("gitstore: empty the journal: %w", err)
		}
	}
	if created {
		// The files' entries must survive a power cut before a record in
		// them is counted on; the truncations are made durable by the
		// first record's fsync.
		if err := atomicfile.SyncDir(gitDir); err != nil {
			j.close()
			return nil, err
		}
	}
	return j, nil
}

func (j *journal) close() error {
	var errs []error
	for i, f := range j.files {
		if f != nil {
			errs = append(errs, f.Close())
			j.files[i] = nil
		}
	}
	return errors.Join(errs...)
}

// file returns the active file, to fsync with the batch's temporary files.
func (j *journal) file() *os.File { return j.files[j.active] }

// append writes rec at the end of the active file, not durably, and
// returns the offset it began at, for undo.
func (j *journal) append(rec []byte) (int64, error) {
	if j.broken != nil {
		return 0, j.broken
	}
	off := j.sizes[j.active]
	n, err := j.files[j.active].WriteAt(rec, off)
	j.sizes[j.active] += int64(n)
	if err != nil {
		return off, fmt.Errorf("gitstore: append to the journal %s: %w", j.paths[j.active], err)
	}
	return off, nil
}

// undo removes what was appended from off on, durably: the record of a
// batch that failed before it was durable must not be rolled forward by
// a later Open, or be followed by later records.
func (j *journal) undo(off int64) error {
	f := j.files[j.active]
	err := f.Truncate(off)
	if err == nil {
		err = barrier.Sync(barrier.FileOp(f))
	}
	if err != nil {
		j.broken = fmt.Errorf("gitstore: the journal %s could not be cut back after a failed change (%v): "+
			"restart the server; its start repairs the journal", j.paths[j.active], err)
		return j.broken
	}
	j.sizes[j.active] = off
	return nil
}

// rotate makes the other file active. It must be empty: its records were
// flushed.
func (j *journal) rotate() {
	j.active = 1 - j.active
	j.sizes[j.active] = 0
}

// emptyInactive empties the inactive file, whose records were flushed. A
// power cut may undo that; Open then finds records the repository
// already holds, which it skips.
func (j *journal) emptyInactive() error {
	i := 1 - j.active
	if err := j.files[i].Truncate(0); err != nil {
		return fmt.Errorf("gitstore: empty the journal %s: %w", j.paths[i], err)
	}
	j.sizes[i] = 0
	return nil
}
