package gitstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// countObjects returns the loose objects and the packs in dir's .git.
func countObjects(t *testing.T, dir string) (loose, packs int) {
	t.Helper()
	objects := filepath.Join(dir, ".git", "objects")
	entries, err := os.ReadDir(objects)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == 2 {
			files, err := os.ReadDir(filepath.Join(objects, e.Name()))
			require.NoError(t, err)
			loose += len(files)
		}
	}
	matches, err := filepath.Glob(filepath.Join(objects, "pack", "pack-*.pack"))
	require.NoError(t, err)
	return loose, len(matches)
}

// TestPackingKeepsEveryCommit commits past the pack threshold many times:
// the loose objects are packed into a new pack each time, the packs are
// merged into one once there are too many, and every commit stays
// readable, by gitstore and by the git CLI.
func TestPackingKeepsEveryCommit(t *testing.T) {
	const threshold, packsMax, commits = 20, 3, 120
	t.Cleanup(gitstore.SetMaxPacks(packsMax))
	dir := t.TempDir()
	s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: threshold})
	require.NoError(t, err)
	defer s.Close()

	type version struct{ hash, path, data string }
	var versions []version
	mostLoose, mostPacks, merges, prevPacks := 0, 0, 0, 0
	for i := range commits {
		rel := fmt.Sprintf("d%d/f%d.yaml", i%3, i%5)
		data := fmt.Sprintf("n: %d\n", i)
		write(t, dir, rel, data)
		h, err := s.Commit(fmt.Sprintf("change %d", i))
		require.NoError(t, err)
		require.NotEmpty(t, h)
		versions = append(versions, version{h, rel, data})

		loose, packs := countObjects(t, dir)
		mostLoose, mostPacks = max(mostLoose, loose), max(mostPacks, packs)
		if packs < prevPacks {
			merges++
			assert.Equal(t, 1, packs, "a merge leaves one pack")
		}
		prevPacks = packs
	}
	// The Commit that takes the loose count past the threshold packs.
	assert.LessOrEqual(t, mostLoose, threshold)
	assert.Equal(t, packsMax, mostPacks, "loose objects go into packs of their own until there are packsMax")
	assert.Positive(t, merges, "the packs were merged at least once")

	git(t, dir, "fsck", "--full", "--strict")
	assert.Empty(t, git(t, dir, "status", "--porcelain"))
	assert.Equal(t, strconv.Itoa(commits), strings.TrimSpace(git(t, dir, "rev-list", "--count", "HEAD")))

	// Every version reads back, through a fresh store too.
	s2, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s2.Close()
	for _, v := range versions {
		for _, st := range []*gitstore.Store{s, s2} {
			b, err := st.ReadAt(v.hash, v.path)
			require.NoError(t, err)
			assert.Equal(t, v.data, string(b))
		}
		assert.Equal(t, v.data, git(t, dir, "show", v.hash+":"+v.path))
	}
}
