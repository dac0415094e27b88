package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// file is one file of a package or archive: its path inside, with slashes,
// its bytes and whether it is executable. Everything else an archive
// records (owner, time, order) is fixed, so that the same files give the
// same bytes.
type file struct {
	Name string
	Data []byte
	Exec bool
}

// mode is the file's permission bits.
func (f file) mode() fs.FileMode {
	if f.Exec {
		return 0o755
	}
	return 0o644
}

// sorted returns files sorted by name, and an error for a name given twice.
func sorted(files []file) ([]file, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(files); i++ {
		if files[i].Name == files[i-1].Name {
			return nil, fmt.Errorf("%s is in the archive twice", files[i].Name)
		}
	}
	return files, nil
}

// tarGz returns a gzipped tar of files under the directory prefix, with
// entries sorted by name, every time set to mtime, owner and group 0 with
// no names, and a gzip header without a name or time: the same files and
// mtime give the same bytes.
func tarGz(prefix string, files []file, mtime time.Time) ([]byte, error) {
	files, err := sorted(files)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	mtime = mtime.UTC().Truncate(time.Second)
	hdr := func(name string, mode fs.FileMode, size int64, typ byte) *tar.Header {
		return &tar.Header{Typeflag: typ, Name: name, Mode: int64(mode), Size: size, ModTime: mtime, Format: tar.FormatUSTAR}
	}
	if err := tw.WriteHeader(hdr(prefix+"/", 0o755, 0, tar.TypeDir)); err != nil {
		return nil, err
	}
	var dirs []string
	for _, f := range files {
		// Parent directories before their files, each once.
		for d := range parents(f.Name) {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
				if err := tw.WriteHeader(hdr(prefix+"/"+d+"/", 0o755, 0, tar.TypeDir)); err != nil {
					return nil, err
				}
			}
		}
		if err := tw.WriteHeader(hdr(prefix+"/"+f.Name, f.mode(), int64(len(f.Data)), tar.TypeReg)); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parents yields the directories above name, outermost first: a/b/c gives
// a, then a/b.
func parents(name string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for i := range len(name) {
			if name[i] == '/' && !yield(name[:i]) {
				return
			}
		}
	}
}

// zipFiles returns a zip of files in the order given, with every time set
// to mtime and Unix permissions recorded: the same files and mtime give
// the same bytes. A wheel's order matters (RECORD last), so it is the
// caller's.
func zipFiles(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: mtime.UTC().Truncate(time.Second)}
		h.SetMode(f.mode())
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeChecksums writes dir/SHA256SUMS for the named files of dir, in the
// format `sha256sum -c` reads, sorted by name.
func writeChecksums(dir string, names []string) error {
	names = slices.Sorted(slices.Values(names))
	var b strings.Builder
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte(b.String()), 0o644)
}

// ChecksumsFile is the name of the checksums file in the output directory.
const ChecksumsFile = "SHA256SUMS"
