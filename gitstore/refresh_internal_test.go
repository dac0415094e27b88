package gitstore

import (
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/require"
)

// TestRefreshObjectsBesideMaintain: the view of the packs a fetch makes
// (refreshObjects, with no flushMu held) must not be one the flush or
// the packing Maintain runs beside it made stale between its listing of
// the packs and its use: every commit and its tree still reads after.
// The hook runs the flush or the packing at that moment.
func TestRefreshObjectsBesideMaintain(t *testing.T) {
	for name, step := range map[string]func(s *Store) error{
		// The flush writes a pack of the journal's commits, which the
		// view did not list, and marks them flushed: useStorage then
		// forgets them from memory.
		"flush": func(s *Store) error { return s.Flush() },
		// The packing merges the packs into one and deletes them: the
		// view lists the deleted packs (and reads fail in them).
		"packing": func(s *Store) error { return s.housekeepPacks(true) },
	} {
		t.Run(name, func(t *testing.T) {
			defer ForceMerge()()
			defer SetPackLimits(2, 1000, 1000)()
			s, err := Init(t.TempDir(), &Options{HoldsLock: true, PackThreshold: 1})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			var commits []string
			for i := range 8 {
				c, err := s.Stage(fmt.Sprintf("change %d", i), []Change{{Path: fmt.Sprintf("f%d.yaml", i), Data: []byte(fmt.Sprintf("v: %d\n", i))}})
				require.NoError(t, err)
				require.NoError(t, c.Wait())
				commits = append(commits, c.Hash())
				if name == "packing" {
					require.NoError(t, s.Flush()) // a pack each
				}
			}
			ran := false
			viewListed = func() {
				if !ran {
					ran = true
					require.NoError(t, step(s))
				}
			}
			defer func() { viewListed = nil }()
			require.NoError(t, s.refreshObjects())
			require.True(t, ran)
			for _, c := range commits {
				s.mu.Lock()
				co, err := s.repo.CommitObject(plumbing.NewHash(c))
				if err == nil {
					_, err = co.Tree()
				}
				s.mu.Unlock()
				require.NoError(t, err, "commit %s", c)
			}
		})
	}
}
