package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var when = time.Date(2026, 11, 24, 8, 1, 31, 0, time.UTC)

func TestTarGzIsDeterministic(t *testing.T) {
	files := []file{
		{Name: "helios", Data: []byte("\x7fELF helios"), Exec: true},
		{Name: "README.md", Data: []byte("# readme\n")},
		{Name: "docs/a.txt", Data: []byte("a")},
		{Name: "LICENSE", Data: []byte("license\n")},
	}
	a, err := tarGz("pkg-1.0", files, when)
	require.NoError(t, err)
	reversed := []file{files[3], files[2], files[1], files[0]}
	b, err := tarGz("pkg-1.0", reversed, when.Add(500*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same files in another order give the same bytes")

	zr, err := gzip.NewReader(bytes.NewReader(a))
	require.NoError(t, err)
	assert.True(t, zr.ModTime.IsZero(), "no time in the gzip header")
	assert.Empty(t, zr.Name)
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Equal(t, when, h.ModTime.UTC(), h.Name)
		assert.Zero(t, h.Uid, h.Name)
		assert.Zero(t, h.Gid, h.Name)
		assert.Empty(t, h.Uname, h.Name)
		want := int64(0o644)
		if h.Typeflag == tar.TypeDir || h.Name == "pkg-1.0/helios" {
			want = 0o755
		}
		assert.Equal(t, want, h.Mode, h.Name)
	}
	assert.Equal(t, []string{"pkg-1.0/", "pkg-1.0/LICENSE", "pkg-1.0/README.md", "pkg-1.0/docs/", "pkg-1.0/docs/a.txt", "pkg-1.0/helios"}, names)

	_, err = tarGz("pkg", []file{files[0], files[0]}, when)
	assert.Error(t, err, "a name given twice")
}

func TestZipIsDeterministic(t *testing.T) {
	files := []file{{Name: "a/bin", Data: []byte("bin"), Exec: true}, {Name: "a/RECORD", Data: []byte("r")}}
	a, err := zipFiles(files, when)
	require.NoError(t, err)
	b, err := zipFiles(files, when)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	zr, err := zip.NewReader(bytes.NewReader(a), int64(len(a)))
	require.NoError(t, err)
	require.Len(t, zr.File, 2)
	assert.Equal(t, "a/bin", zr.File[0].Name, "the caller's order")
	assert.Equal(t, os.FileMode(0o755), zr.File[0].Mode().Perm())
	assert.Equal(t, os.FileMode(0o644), zr.File[1].Mode().Perm())
	assert.Equal(t, when, zr.File[0].Modified.UTC())
}

// TestChecksums: SHA256SUMS is in the format sha256sum -c checks.
func TestChecksums(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"b.tar.gz": "bee", "a.whl": "ay"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	require.NoError(t, writeChecksums(dir, []string{"b.tar.gz", "a.whl"}))
	got, err := os.ReadFile(filepath.Join(dir, ChecksumsFile))
	require.NoError(t, err)
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	assert.Equal(t, sum("ay")+"  a.whl\n"+sum("bee")+"  b.tar.gz\n", string(got))
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "-c", "--strict", ChecksumsFile)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "%s", out)
	}
}
