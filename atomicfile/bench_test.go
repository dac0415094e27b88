package atomicfile_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

var kib = bytes.Repeat([]byte("x"), 1024)

// BenchmarkWriteFile replaces a 1 KiB file durably.
func BenchmarkWriteFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "f")
	for b.Loop() {
		if err := atomicfile.WriteFile(path, kib, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawFloor is the least a durable replace can do, with plain os
// calls: create a temp file in the same directory, write, fsync, close,
// rename, fsync the directory. WriteFile's overhead is measured against it.
func BenchmarkRawFloor(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "f")
	i := 0
	for b.Loop() {
		i++
		tmp := filepath.Join(dir, ".f"+strconv.Itoa(i))
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(kib); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			b.Fatal(err)
		}
		d, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
}

// BenchmarkThreeFiles replaces three 1 KiB files durably, one WriteFile
// each (impl=WriteFile) and in one WriteFiles call (impl=WriteFiles).
func BenchmarkThreeFiles(b *testing.B) {
	b.Run("impl=WriteFile", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			for _, name := range []string{"a", "b", "c"} {
				if err := atomicfile.WriteFile(filepath.Join(dir, name), kib, 0o600); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=WriteFiles", func(b *testing.B) {
		dir := b.TempDir()
		files := []atomicfile.File{
			{Path: filepath.Join(dir, "a"), Data: kib, Perm: 0o600},
			{Path: filepath.Join(dir, "b"), Data: kib, Perm: 0o600},
			{Path: filepath.Join(dir, "c"), Data: kib, Perm: 0o600},
		}
		for b.Loop() {
			if err := atomicfile.WriteFiles(files...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
