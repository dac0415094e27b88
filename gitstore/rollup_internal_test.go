package gitstore

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEncodeRollupMakesDeltasGitReads packs the history of a file changed
// line by line, 200 times, with encodeRollup: git verifies the pack and
// finds most of its blobs stored as deltas, every object reads back the
// same through go-git and the git CLI, and the pack is no larger than
// go-git's encoder makes it, give or take a tenth.
func TestEncodeRollupMakesDeltasGitReads(t *testing.T) {
	dir := t.TempDir()
	s, err := Init(dir, &Options{PackThreshold: -1})
	require.NoError(t, err)
	defer s.Close()
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("key%02d: value number %d of a persona's preferences", i, i))
	}
	for i := range 200 {
		lines[i%40] = fmt.Sprintf("key%02d: changed %d times, the last at step %d", i%40, i/40+1, i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "persona.yaml"), []byte(strings.Join(lines, "\n")+"\n"), 0o600))
		_, err := s.Commit(fmt.Sprintf("change %d", i))
		require.NoError(t, err)
	}
	var hashes []plumbing.Hash
	require.NoError(t, s.storage.ForEachObjectHash(func(h plumbing.Hash) error { hashes = append(hashes, h); return nil }))
	require.Len(t, hashes, 600, "200 commits, trees and blobs")

	pack, idx, name, err := encodeRollup(s.storage, hashes)
	require.NoError(t, err)
	var theirs bytes.Buffer
	_, err = packfile.NewEncoder(&theirs, s.storage, false).Encode(hashes, packWindow)
	require.NoError(t, err)
	t.Logf("pack: %d bytes; go-git's encoder: %d bytes", len(pack), theirs.Len())
	assert.LessOrEqual(t, len(pack), theirs.Len()*11/10, "the pack is larger than go-git's")

	// Into the repository, the loose objects gone: only the pack holds them.
	require.NoError(t, writePackFiles(s.gitDir, name, pack, idx))
	for _, h := range hashes {
		require.NoError(t, s.storage.DeleteLooseObject(h))
	}
	base := filepath.Join(s.gitDir, "objects", "pack", "pack-"+name.String())
	out, err := exec.Command("git", "verify-pack", "-v", base+".idx").CombinedOutput()
	require.NoError(t, err, "git verify-pack: %s", out)
	deltas := 0
	for line := range strings.SplitSeq(string(out), "\n") {
		// An object stored as a delta: hash type size size-in-pack offset depth base.
		if f := strings.Fields(line); len(f) == 7 && f[1] == "blob" {
			deltas++
		}
	}
	assert.Greater(t, deltas, 150, "blobs stored as deltas, of 200:\n%s", out)
	out, err = exec.Command("git", "-C", dir, "fsck", "--full", "--strict").CombinedOutput()
	require.NoError(t, err, "git fsck: %s", out)

	fresh, err := Open(dir, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer fresh.Close()
	for _, h := range hashes {
		o, err := fresh.storage.EncodedObject(plumbing.AnyObject, h)
		require.NoError(t, err, "object %s", h)
		got, err := objectContents(o)
		require.NoError(t, err)
		want, err := exec.Command("git", "-C", dir, "cat-file", o.Type().String(), h.String()).Output()
		require.NoError(t, err, "git cat-file %s", h)
		require.Equal(t, string(want), string(got), "object %s", h)
		require.Equal(t, h, plumbing.ComputeHash(o.Type(), got), "object %s", h)
	}
}
