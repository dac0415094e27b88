package crashsuite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckOrphans: a slot holding the value of a change whose process was
// killed passes only if a commit after the slot's acknowledged one set it;
// the same value from before the acknowledgement is a lost write.
func TestCheckOrphans(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []string // k1's value in each commit, oldest first; "Y" is the acknowledged one
		lost  bool
	}{
		{"the orphan landed after the acknowledged change", []string{"Y", "X"}, false},
		{"the orphan landed before, and came back uncommitted", []string{"X", "Y"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHome(t.TempDir())
			dir := h.configDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "personas"), 0o755))
			_, err := git(t.Context(), dir, nil, "init", "-q")
			require.NoError(t, err)
			var ackY string
			for _, v := range tc.order {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "personas", "default.yaml"),
					[]byte("name: default\npreferences:\n  k1: "+v+"\n"), 0o644))
				_, err := git(t.Context(), dir, nil, "add", "-A")
				require.NoError(t, err)
				_, err = git(t.Context(), dir, nil, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "set "+v)
				require.NoError(t, err)
				if v == "Y" {
					out, err := git(t.Context(), dir, nil, "rev-parse", "HEAD")
					require.NoError(t, err)
					ackY = strings.TrimSpace(string(out))
				}
			}
			u := update{Persona: "default", Key: "k1", Value: "Y"}
			h.record(u, ackY)
			h.orphaned(update{Persona: "default", Key: "k1", Value: "X"})
			disk := map[string]map[string]string{"default": {"k1": "X"}}
			assert.Empty(t, h.checkDisk(disk), "an orphan passes the disk check")
			errs := h.checkOrphans(t.Context(), disk)
			if !tc.lost {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			var lost *lostError
			assert.True(t, errors.As(errs[0], &lost), "%v", errs[0])
			assert.Contains(t, errs[0].Error(), `no commit after the acknowledged "Y" sets it`)
		})
	}
}
