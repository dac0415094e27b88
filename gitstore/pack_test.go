package gitstore_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// countObjects returns the loose objects and the packs in dir's .git.
func countObjects(t testing.TB, dir string) (loose, packs int) {
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
	return loose, len(packSizes(t, dir))
}

// packSizes returns the packs in dir's .git, by name, with the number of
// objects each holds.
func packSizes(t testing.TB, dir string) map[string]int {
	t.Helper()
	idxs, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.idx"))
	require.NoError(t, err)
	out := map[string]int{}
	for _, p := range idxs {
		if _, err := os.Stat(strings.TrimSuffix(p, ".idx") + ".pack"); err != nil {
			continue
		}
		f, err := os.Open(p)
		require.NoError(t, err)
		idx := idxfile.NewMemoryIndex()
		require.NoError(t, idxfile.NewDecoder(f).Decode(idx))
		f.Close()
		n, err := idx.Count()
		require.NoError(t, err)
		out[filepath.Base(p)] = int(n)
	}
	return out
}

// TestPackingKeepsEveryCommit commits past the pack threshold many times:
// the loose objects go into a new pack each time, merged with the smallest
// packs as the progression needs; no merge writes more than its bound, a
// frozen pack is never rewritten, there are few small packs, and every
// commit stays readable, by gitstore and by the git CLI.
func TestPackingKeepsEveryCommit(t *testing.T) {
	const threshold, commits = 20, 150
	const frozen, bound = 4 * threshold, 6 * threshold // gitstore's frozenPacks and maxMerge
	dir := t.TempDir()
	s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: threshold})
	require.NoError(t, err)
	defer s.Close()

	type version struct{ hash, path, data string }
	var versions []version
	mostLoose, merges, mostSmall := 0, 0, 0
	packs := packSizes(t, dir)
	for i := range commits {
		rel := fmt.Sprintf("d%d/f%d.yaml", i%3, i%5)
		data := fmt.Sprintf("n: %d\n", i)
		write(t, dir, rel, data)
		h, err := s.Commit(fmt.Sprintf("change %d", i))
		require.NoError(t, err)
		require.NotEmpty(t, h)
		versions = append(versions, version{h, rel, data})

		loose, _ := countObjects(t, dir)
		mostLoose = max(mostLoose, loose)
		after := packSizes(t, dir)
		small := 0
		for name, n := range after {
			if _, ok := packs[name]; !ok {
				assert.LessOrEqual(t, n, bound, "commit %d: a new pack of %d objects", i, n)
			}
			if n < frozen {
				small++
			}
		}
		mostSmall = max(mostSmall, small)
		for name, n := range packs {
			if _, ok := after[name]; !ok {
				merges++
				assert.Less(t, n, frozen, "commit %d: a frozen pack was merged", i)
			}
		}
		packs = after
	}
	// The Commit that takes the loose count past the threshold packs.
	assert.LessOrEqual(t, mostLoose, threshold)
	assert.Positive(t, merges, "packs were merged")
	assert.LessOrEqual(t, mostSmall, 3, "the packs below the frozen size are few")
	t.Logf("%d packs (%v objects), %d merged away", len(packs), slices.Sorted(maps.Values(packs)), merges)

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

// TestMaintainTidiesSmallPacks: the packs the flushes leave, far fewer
// objects than PackThreshold, are merged down to two once changes pause,
// and nothing is lost.
func TestMaintainTidiesSmallPacks(t *testing.T) {
	defer gitstore.SetPackIdle(20 * time.Millisecond)()
	dir := t.TempDir()
	write(t, dir, "a.yaml", "a: 0\n")
	s, err := gitstore.Init(dir, nil) // the default threshold: 2,000 objects
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Commit("init")
	require.NoError(t, err)
	for i := range 9 {
		stage(t, s, fmt.Sprint(i), put("a.yaml", fmt.Sprintf("a: %d\n", i+1)))
		require.NoError(t, s.Apply())
		require.NoError(t, s.Flush()) // one small pack each
	}
	_, before := countObjects(t, dir)
	require.GreaterOrEqual(t, before, 9)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Maintain(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	stage(t, s, "last", put("a.yaml", "a: last\n"))
	require.NoError(t, s.Apply())
	require.Eventually(t, func() bool { _, packs := countObjects(t, dir); return packs <= 2 }, 30*time.Second, 5*time.Millisecond,
		"tidied once quiet")
	cancel()
	<-done
	git(t, dir, "fsck", "--full", "--strict")
	hist, err := s.History("", 0)
	require.NoError(t, err)
	assert.Len(t, hist, 11)
	assert.Equal(t, "a: last\n", git(t, dir, "show", "HEAD:a.yaml"))
}
