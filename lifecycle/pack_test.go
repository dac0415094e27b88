package lifecycle_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
)

// TestRunPackThreshold: Spec.Git.PackThreshold reaches the harness's
// repository. A home holding more loose objects than the threshold gets
// them packed by the next commit the harness makes (here, of a hand edit
// at the stop), and one whose threshold says never keeps them loose.
func TestRunPackThreshold(t *testing.T) {
	for _, tc := range []struct {
		threshold int
		packed    bool
	}{{4, true}, {-1, false}} {
		t.Run(fmt.Sprint(tc.threshold), func(t *testing.T) {
			opts := options(t)
			require.NoError(t, run(t, opts).stop(t)) // installed
			config := filepath.Join(opts.Home, "config")
			store, err := gitstore.Open(config, &gitstore.Options{HoldsLock: true, PackThreshold: -1})
			require.NoError(t, err)
			for i := range 5 {
				require.NoError(t, atomicfile.WriteFile(filepath.Join(config, "notes.yaml"), fmt.Appendf(nil, "notes: [%d]\n", i), 0o600))
				_, err := store.Commit(fmt.Sprint("note ", i))
				require.NoError(t, err)
			}
			require.NoError(t, store.Close())
			before := looseObjects(t, config)
			require.Greater(t, before, 4, "the commits left loose objects")

			opts.Spec.Git = &gitstore.Options{PackThreshold: tc.threshold}
			r := run(t, opts)
			require.NoError(t, atomicfile.WriteFile(filepath.Join(config, "notes.yaml"), []byte("notes: [by hand]\n"), 0o600))
			require.NoError(t, r.stop(t)) // commits the hand edit
			if tc.packed {
				assert.Zero(t, looseObjects(t, config), "packed")
			} else {
				assert.Greater(t, looseObjects(t, config), before, "never packed: the stop's commit added loose objects")
			}
		})
	}
}

// looseObjects counts the loose objects of the repository in dir.
func looseObjects(t *testing.T, dir string) int {
	n := 0
	subdirs, err := os.ReadDir(filepath.Join(dir, ".git", "objects"))
	require.NoError(t, err)
	for _, d := range subdirs {
		if len(d.Name()) == 2 && d.IsDir() {
			entries, err := os.ReadDir(filepath.Join(dir, ".git", "objects", d.Name()))
			require.NoError(t, err)
			n += len(entries)
		}
	}
	return n
}
