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

// TestMissingHEAD: a .git/HEAD that is missing is reported as missing,
// in a dry run, by Inspect and by the repair; one that is empty, as what
// it held.
func TestMissingHEAD(t *testing.T) {
	for name, tc := range map[string]struct {
		damage      func(path string) error
		dry, repair string
	}{
		"missing": {os.Remove, "would write the missing .git/HEAD", "wrote the missing .git/HEAD"},
		"empty": {func(path string) error { return os.WriteFile(path, nil, 0o644) },
			`would rewrite .git/HEAD (was "")`, `rewrote .git/HEAD (was "")`},
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			config := filepath.Join(home, "config")
			require.NoError(t, os.MkdirAll(config, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(config, "a.yaml"), []byte("a: 1\n"), 0o600))
			s, err := gitstore.Init(config, nil)
			require.NoError(t, err)
			_, err = s.Commit("install")
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NoError(t, os.MkdirAll(filepath.Join(home, recovery.CheckpointsDir), 0o700))
			require.NoError(t, os.MkdirAll(filepath.Join(home, recovery.BackupsDir), 0o700))
			require.NoError(t, tc.damage(filepath.Join(config, ".git", "HEAD")))
			actions := func(r recovery.Report) []string {
				var got []string
				for _, f := range r.Findings {
					got = append(got, f.Action)
				}
				return got
			}

			store, err := gitstore.Open(config, &gitstore.Options{ReadOnly: true})
			require.NoError(t, err)
			inspected, err := recovery.Inspect(store, recovery.Options{Home: home})
			require.NoError(t, store.Close())
			require.NoError(t, err)
			assert.Equal(t, []string{tc.dry}, actions(inspected))
			dry, err := recovery.Run(t.Context(), recovery.Options{Home: home, DryRun: true})
			require.NoError(t, err)
			assert.Equal(t, []string{tc.dry}, actions(dry))
			fixed, err := recovery.Run(t.Context(), recovery.Options{Home: home})
			require.NoError(t, err)
			assert.Equal(t, []string{tc.repair}, actions(fixed))
		})
	}
}

// TestReportNotes: a report's notes follow its findings, one "note:" line
// each, clean or not.
func TestReportNotes(t *testing.T) {
	r := recovery.Report{Home: "/h", Notes: []string{"n1", "n2"}}
	assert.Equal(t, "home /h: clean\nnote: n1\nnote: n2", r.String())
	r.Findings = []recovery.Finding{{Kind: recovery.KindMissingDir, Path: "backups", Action: "created"}}
	assert.Equal(t, "home /h: found 1:\nmissing-dir backups: created\nnote: n1\nnote: n2", r.String())
}
