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

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// encodePack returns objs as a git pack (version 2, no deltas, each
// object's zlib stream stored, not compressed) and its index. A flush
// writes a few changes' objects, which packing merges, compressed and
// deltified, later: compressing them here, and parsing the pack back to
// index it as go-git's writer does, was most of a flush's work, and a
// third of a change's when eight clients wrote at once.
func encodePack(objs []plumbing.EncodedObject) (pack, idx []byte, name plumbing.Hash, err error) {
	var buf bytes.Buffer
	buf.WriteString("PACK")
	buf.Write(binary.BigEndian.AppendUint32(nil, 2))
	buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(objs))))
	w := new(idxfile.Writer)
	if err := w.OnHeader(uint32(len(objs))); err != nil {
		return nil, nil, name, err
	}
	zw, _ := zlib.NewWriterLevel(nil, zlib.NoCompression)
	for _, o := range objs {
		data, err := objectContents(o)
		if err != nil {
			return nil, nil, name, err
		}
		start := buf.Len()
		buf.Write(entryHeader(o.Type(), int64(len(data))))
		zw.Reset(&buf)
		if _, err := zw.Write(data); err != nil {
			return nil, nil, name, err
		}
		if err := zw.Close(); err != nil {
			return nil, nil, name, err
		}
		w.Add(o.Hash(), uint64(start), crc32.ChecksumIEEE(buf.Bytes()[start:]))
	}
	sum := sha1.Sum(buf.Bytes())
	buf.Write(sum[:])
	name = plumbing.Hash(sum)
	if err := w.OnFooter(name); err != nil {
		return nil, nil, name, err
	}
	mi, err := w.Index()
	if err != nil {
		return nil, nil, name, err
	}
	var ibuf bytes.Buffer
	if _, err := idxfile.NewEncoder(&ibuf).Encode(mi); err != nil {
		return nil, nil, name, err
	}
	return buf.Bytes(), ibuf.Bytes(), name, nil
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
	dir := filepath.Join(s.gitDir, "objects", "pack")
	if err := atomicfile.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, "pack-"+name.String())
	if _, err := os.Stat(base + ".pack"); err == nil {
		return nil // written before a crash: the same objects, the same name
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
