package gitstore

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	gitbinary "github.com/go-git/go-git/v5/utils/binary"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// encodePack returns objs as a git pack (version 2, no deltas, each
// object's zlib stream stored, not compressed) and its index. A flush
// writes a few changes' objects, which packing merges, compressed and
// deltified, later: compressing them here, and parsing the pack back to
// index it as go-git's writer does, was most of a flush's work, and a
// third of a change's when eight clients wrote at once.
func encodePack(objs []plumbing.EncodedObject) (pack, idx []byte, name plumbing.Hash, err error) {
	p, err := newPackWriter(len(objs), zlib.NoCompression)
	if err != nil {
		return nil, nil, name, err
	}
	for _, o := range objs {
		data, err := objectContents(o)
		if err != nil {
			return nil, nil, name, err
		}
		if err := p.add(o.Hash(), entryHeader(o.Type(), int64(len(data))), data); err != nil {
			return nil, nil, name, err
		}
	}
	return p.finish()
}

// packWriter builds a git pack (version 2) and its index in memory, an
// entry at a time.
type packWriter struct {
	buf bytes.Buffer
	idx idxfile.Writer
	zw  *zlib.Writer
}

// newPackWriter starts a pack of n entries, compressed at level.
func newPackWriter(n, level int) (*packWriter, error) {
	p := &packWriter{}
	p.buf.WriteString("PACK")
	p.buf.Write(binary.BigEndian.AppendUint32(nil, 2))
	p.buf.Write(binary.BigEndian.AppendUint32(nil, uint32(n)))
	if err := p.idx.OnHeader(uint32(n)); err != nil {
		return nil, err
	}
	var err error
	if p.zw, err = zlib.NewWriterLevel(nil, level); err != nil {
		return nil, err
	}
	return p, nil
}

// offset is where the next entry starts.
func (p *packWriter) offset() int64 { return int64(p.buf.Len()) }

// add writes the entry of object h: head (the type and size, and a delta's
// base), then body compressed, and indexes it.
func (p *packWriter) add(h plumbing.Hash, head, body []byte) error {
	start := p.buf.Len()
	p.buf.Write(head)
	p.zw.Reset(&p.buf)
	if _, err := p.zw.Write(body); err != nil {
		return err
	}
	if err := p.zw.Close(); err != nil {
		return err
	}
	p.idx.Add(h, uint64(start), crc32.ChecksumIEEE(p.buf.Bytes()[start:]))
	return nil
}

// finish ends the pack with its checksum, which names it, and returns it
// with its index.
func (p *packWriter) finish() (pack, idx []byte, name plumbing.Hash, err error) {
	sum := sha1.Sum(p.buf.Bytes())
	p.buf.Write(sum[:])
	name = plumbing.Hash(sum)
	if err := p.idx.OnFooter(name); err != nil {
		return nil, nil, name, err
	}
	mi, err := p.idx.Index()
	if err != nil {
		return nil, nil, name, err
	}
	var ibuf bytes.Buffer
	if _, err := idxfile.NewEncoder(&ibuf).Encode(mi); err != nil {
		return nil, nil, name, err
	}
	return p.buf.Bytes(), ibuf.Bytes(), name, nil
}

// entryHeader is a pack entry's header: the type and the size, in git's
// variable-length encoding.
func entryHeader(t plumbing.ObjectType, size int64) []byte {
	b := byte(t)<<4 | byte(size&0x0f)
	size >>= 4
	var out []byte
	for size > 0 {
		out = append(out, b|0x80)
		b = byte(size & 0x7f)
		size >>= 7
	}
	return append(out, b)
}

// writeMemPack writes objs as one pack in the repository, durably: the
// pack and its index as temporary files fsynced together, the index
// renamed into place, then the pack (an index alone is ignored by git and
// go-git, and removed by Open), then their directory fsynced.
func (s *Store) writeMemPack(objs []plumbing.EncodedObject) error {
	if len(objs) == 0 {
		return nil
	}
	pack, idx, name, err := encodePack(objs)
	if err != nil {
		return fmt.Errorf("gitstore: flush the journal to %s: %w", s.dir, err)
	}
	return writePackFiles(s.gitDir, name, pack, idx)
}

// writePackFiles writes pack name and its index in the repository at
// gitDir, durably, as writeMemPack says; a pack of that name already
// there holds the same objects and is kept.
func writePackFiles(gitDir string, name plumbing.Hash, pack, idx []byte) error {
	dir := filepath.Join(gitDir, "objects", "pack")
	if err := atomicfile.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	base := filepath.Join(dir, "pack-"+name.String())
	if _, err := os.Stat(base + ".pack"); err == nil {
		// Written before: the same objects, the same name. Its directory
		// entry may not be durable (a crash before the fsync of the
		// directory), and the caller deletes the objects' other copies
		// next.
		return atomicfile.SyncDir(dir)
	}
	b, err := atomicfile.Prepare(
		atomicfile.File{Path: base + ".idx", Data: idx, Perm: 0o444},
		atomicfile.File{Path: base + ".pack", Data: pack, Perm: 0o444})
	if err != nil {
		return err
	}
	defer b.Cleanup()
	if err := b.Sync(); err != nil {
		return err
	}
	if err := b.Rename(); err != nil {
		return err
	}
	return b.SyncDirs()
}

// maxDeltaDepth bounds a delta chain, as go-git's encoder does.
const maxDeltaDepth = 50

// rollupObject is one object of a pack encodeRollup writes.
type rollupObject struct {
	obj    plumbing.EncodedObject // nil once out of the delta window
	data   []byte                 // its contents while it is in the delta window
	offset int64
	depth  int // the length of its delta chain; 0 when stored whole
}

// encodeRollup returns the objects hashes names, read from st, as one git
// pack (version 2) and its index, each object compressed and, blobs and
// trees, stored as a delta (OFS_DELTA) on one of the packWindow-1 objects
// before it when that is small enough, as go-git's encoder chooses them:
// objects of one type, largest first, a delta at most half the object and
// less the deeper its base's chain.
//
// It is go-git's Encoder and pack writer done in one goroutine. Theirs
// search for deltas in a goroutine per object type and index the pack in
// another as it is written: on a machine of two processors the roll-up of
// a busy server's packs took both for a second, and each change waited up
// to a scheduling slice (10 ms) at each of its fsyncs for a processor to
// run on (changes of 20-40 ms in BENCHMARKS.md, issue 20). This one
// leaves the other processors to the changes, and yields at each object
// for a server run on one.
func encodeRollup(st storer.EncodedObjectStorer, hashes []plumbing.Hash) (pack, idx []byte, name plumbing.Hash, err error) {
	objs := make([]*rollupObject, 0, len(hashes))
	for _, h := range hashes {
		o, err := st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return nil, nil, name, fmt.Errorf("object %s: %w", h, err)
		}
		objs = append(objs, &rollupObject{obj: o})
	}
	// go-git's order: by type, tags first, then the largest first, so a
	// delta's base is written before it.
	slices.SortStableFunc(objs, func(a, b *rollupObject) int {
		if a.obj.Type() != b.obj.Type() {
			return int(b.obj.Type()) - int(a.obj.Type())
		}
		return int(b.obj.Size() - a.obj.Size())
	})

	p, err := newPackWriter(len(objs), zlib.DefaultCompression)
	if err != nil {
		return nil, nil, name, err
	}
	for i, o := range objs {
		runtime.Gosched()
		if o.data, err = objectContents(o.obj); err != nil {
			return nil, nil, name, fmt.Errorf("object %s: %w", o.obj.Hash(), err)
		}
		if i >= packWindow {
			// Out of the window: only its offset and depth are needed.
			objs[i-packWindow].obj, objs[i-packWindow].data = nil, nil
		}
		o.offset = p.offset()
		head, body := entryHeader(o.obj.Type(), int64(len(o.data))), o.data
		if base, delta := bestDelta(objs, i); base != nil {
			o.depth, body = base.depth+1, delta
			var ofs bytes.Buffer
			ofs.Write(entryHeader(plumbing.OFSDeltaObject, int64(len(delta))))
			if err := gitbinary.WriteVariableWidthInt(&ofs, o.offset-base.offset); err != nil {
				return nil, nil, name, err
			}
			head = ofs.Bytes()
		}
		if err := p.add(o.obj.Hash(), head, body); err != nil {
			return nil, nil, name, err
		}
	}
	return p.finish()
}

// bestDelta returns the base among the objects of the window before
// objs[i], and the delta on it, that go-git's delta selector would choose
// for objs[i], or nil when it would store the object whole.
func bestDelta(objs []*rollupObject, i int) (*rollupObject, []byte) {
	target := objs[i]
	if t := target.obj.Type(); t != plumbing.BlobObject && t != plumbing.TreeObject {
		return nil, nil
	}
	size := int64(len(target.data))
	var base *rollupObject
	var delta []byte
	for j := i - 1; j >= 0 && i-j < packWindow; j-- {
		b := objs[j]
		if b.obj.Type() != target.obj.Type() {
			break // sorted by type: no more of this one
		}
		bsize := int64(len(b.data))
		if size < bsize>>4 {
			continue // radically different sizes
		}
		var limit int64
		if base == nil {
			// At most half the object, less on a deeper base.
			limit = (size >> 1) * int64(maxDeltaDepth-b.depth) / maxDeltaDepth
		} else if d := base.depth + 1; d < maxDeltaDepth {
			// Better than the delta chosen.
			limit = int64(len(delta)) * int64(maxDeltaDepth-b.depth) / int64(maxDeltaDepth-d)
		}
		if limit <= 8 || bsize-size > limit {
			continue
		}
		if d := packfile.DiffDelta(b.data, target.data); int64(len(d)) < limit {
			base, delta = b, d
		}
	}
	return base, delta
}
