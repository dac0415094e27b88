package gitstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// TestReadOnlyBesideAWriter: a ReadOnly store opened while the writer
// applies, flushes (a pack and the ref, the journal emptied) and merges
// packs sees every commit Apply returned before it was opened, and reads
// them all: neither the ref moving between its reads of the ref and the
// journal, nor a pack written or merged away after it listed the packs,
// loses it a commit or an object.
func TestReadOnlyBesideAWriter(t *testing.T) {
	defer gitstore.SetPackIdle(time.Millisecond)()
	dir := t.TempDir()
	write(t, dir, "a.yaml", "a: 0\n")
	s, err := gitstore.Init(dir, &gitstore.Options{PackThreshold: 30})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Commit("init")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { s.Maintain(ctx) })

	const changes = 200
	var applied atomic.Int64 // commits Apply has returned, the initial one included
	applied.Store(1)
	wg.Go(func() {
		defer cancel()
		for i := range changes {
			_, err := s.Stage(fmt.Sprint(i), []gitstore.Change{put("a.yaml", fmt.Sprintf("a: %d\n", i+1)), put(fmt.Sprintf("n/%d.yaml", i), "n\n")})
			if !assert.NoError(t, err) || !assert.NoError(t, s.Apply()) {
				return
			}
			applied.Add(1)
			if i%3 == 0 {
				if !assert.NoError(t, s.Flush()) {
					return
				}
			}
		}
	})

	opens := 0
	for ctx.Err() == nil {
		before := applied.Load()
		ro, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
		require.NoError(t, err, "open %d", opens)
		hist, err := ro.History("", 0)
		if err == nil {
			assert.GreaterOrEqual(t, int64(len(hist)), before, "open %d sees every commit applied before it", opens)
			for _, c := range hist[:min(len(hist), 5)] {
				_, err = ro.FilesAt(c.Hash)
				if err != nil {
					break
				}
			}
		}
		ro.Close()
		require.NoError(t, err, "open %d reads its history", opens)
		opens++
	}
	t.Logf("%d read-only opens beside %d changes", opens, applied.Load()-1)
	assert.Equal(t, int64(changes+1), applied.Load())
}
