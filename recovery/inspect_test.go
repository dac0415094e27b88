package recovery_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// TestInspect: Inspect reports what Run's dry run reports of the config
// repository and the config files, in the same words, and nothing of the
// rest of the home; it changes nothing.
func TestInspect(t *testing.T) {
	home := t.TempDir()
	config := filepath.Join(home, "config")
	require.NoError(t, os.MkdirAll(filepath.Join(config, "todos"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(config, "todos", "1.yaml"), []byte("id: 1\ntitle: milk\n"), 0o600))
	s, err := gitstore.Init(config, nil)
	require.NoError(t, err)
	_, err = s.Commit("install")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	corrupt := []byte("id: 1\ntitle: \"buy mi")
	require.NoError(t, os.WriteFile(filepath.Join(config, "todos", "1.yaml"), corrupt, 0o600))
	require.NoError(t, os.Remove(filepath.Join(config, ".git", "HEAD")))
	require.NoError(t, os.WriteFile(filepath.Join(home, "state.json"), []byte("{torn"), 0o600)) // not Inspect's

	dry, err := recovery.Run(t.Context(), recovery.Options{Home: home, DryRun: true})
	require.NoError(t, err)
	var want []recovery.Finding
	for _, f := range dry.Findings {
		if f.Kind == recovery.KindGitRepair || f.Kind == recovery.KindCorruptConfig {
			want = append(want, f)
		}
	}
	require.Len(t, want, 2, "%s", dry)

	store, err := gitstore.Open(config, &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	got, err := recovery.Inspect(store, recovery.Options{Home: home})
	require.NoError(t, err)
	assert.True(t, got.DryRun)
	assert.Equal(t, want, got.Findings)
	data, err := os.ReadFile(filepath.Join(config, "todos", "1.yaml"))
	require.NoError(t, err)
	assert.Equal(t, corrupt, data, "nothing changed")
	assert.NoFileExists(t, filepath.Join(config, ".git", "HEAD"))

	_, err = recovery.Inspect(nil, recovery.Options{Home: home})
	assert.Error(t, err, "a nil store is the caller's error, not a panic")
}
