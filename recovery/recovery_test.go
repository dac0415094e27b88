package recovery_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/recovery"
)

func fixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "recovery", name))
	require.NoError(t, err)
	return b
}

// newHome makes an installed home: config/ committed with base.yaml and
// personas/default.yaml from testdata/recovery.
func newHome(t *testing.T) string {
	home := filepath.Join(t.TempDir(), "home")
	for _, d := range []string{"config/personas", "checkpoints", "backups"} {
		require.NoError(t, os.MkdirAll(filepath.Join(home, d), 0o700))
	}
	require.NoError(t, os.WriteFile(filepath.Join(home, "config", "base.yaml"), fixture(t, "base.yaml"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(home, "config", "personas", "default.yaml"), fixture(t, "default.yaml"), 0o600))
	s, err := gitstore.Init(filepath.Join(home, "config"), nil)
	require.NoError(t, err)
	_, err = s.Commit("install")
	require.NoError(t, err)
	s.Close()
	return home
}

func put(t *testing.T, home, rel string, data []byte) {
	p := filepath.Join(home, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, data, 0o600))
}

func read(t *testing.T, home, rel string) string {
	b, err := os.ReadFile(filepath.Join(home, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

func kinds(r recovery.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Kind)
	}
	slices.Sort(out)
	return out
}

// backupHashes returns the sha256 of every file in backups/.
func backupHashes(t *testing.T, home string) map[[32]byte]string {
	out := map[[32]byte]string{}
	entries, err := os.ReadDir(filepath.Join(home, "backups"))
	require.NoError(t, err)
	for _, e := range entries {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(home, "backups", e.Name()))
			require.NoError(t, err)
			out[sha256.Sum256(b)] = e.Name()
		}
	}
	return out
}

func TestRunFindsAndFixes(t *testing.T) {
	cases := []struct {
		name  string
		plant func(t *testing.T, home string)
		kinds []string
		check func(t *testing.T, home string, r recovery.Report)
	}{
		{
			name: "orphan temps",
			plant: func(t *testing.T, home string) {
				put(t, home, "config/.base.yaml.mcpkeep-tmp1234567890123456789", []byte("half"))
				put(t, home, ".version.mcpkeep-tmp9876543210987654321", []byte("half"))
				put(t, home, "config/.keep", []byte("mine"))
				put(t, home, ".log.20240101123045123", []byte("mine"))
			},
			// The user's new .keep is not a temp file: it is kept and
			// committed. Nor is a name that merely ends in digits.
			kinds: []string{recovery.KindOrphanTemp, recovery.KindOrphanTemp, recovery.KindUncommitted},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.Equal(t, "mine", read(t, home, "config/.keep"), "only temp files are removed")
				assert.Equal(t, "mine", read(t, home, ".log.20240101123045123"), "only temp files are removed")
			},
		},
		{
			// A kill while an upgrade copies config/ into backups/ (found
			// by the crash suite): the copy's .git is not gitstore's.
			name: "orphan temp in a backup's .git",
			plant: func(t *testing.T, home string) {
				put(t, home, "backups/upgrade-v1-x/.git/objects/4b/.6a6bbd35e65444640c593c6bd38bc361d3403e.mcpkeep-tmp5139064717966035645", []byte("half"))
				put(t, home, "backups/upgrade-v1-x/.git/HEAD", []byte("ref: refs/heads/main\n"))
			},
			kinds: []string{recovery.KindOrphanTemp},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.NoFileExists(t, filepath.Join(home, "backups/upgrade-v1-x/.git/objects/4b/.6a6bbd35e65444640c593c6bd38bc361d3403e.mcpkeep-tmp5139064717966035645"))
				assert.Equal(t, "ref: refs/heads/main\n", read(t, home, "backups/upgrade-v1-x/.git/HEAD"), "only temp files are removed")
			},
		},
		{
			// A kill during go-git's object write, then an upgrade's
			// restore moving that config/ aside (found by the crash suite).
			name: "go-git temp in a backup's .git",
			plant: func(t *testing.T, home string) {
				put(t, home, "backups/failed-upgrade-v1-x/.git/objects/pack/tmp_obj_2831240762", []byte("half"))
				put(t, home, "backups/tmp_obj_notes", []byte("mine"))
			},
			kinds: []string{recovery.KindOrphanTemp},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.NoFileExists(t, filepath.Join(home, "backups/failed-upgrade-v1-x/.git/objects/pack/tmp_obj_2831240762"))
				assert.Equal(t, "mine", read(t, home, "backups/tmp_obj_notes"), "go-git's names mean nothing outside a .git")
			},
		},
		{
			name:  "stale git lock",
			plant: func(t *testing.T, home string) { put(t, home, "config/.git/index.lock", nil) },
			kinds: []string{recovery.KindStaleGitLock},
		},
		{
			name:  "stale state of a dead server",
			plant: func(t *testing.T, home string) { put(t, home, "state.json", fixture(t, "stale-state.json")) },
			kinds: []string{recovery.KindStaleState},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.NoFileExists(t, filepath.Join(home, "state.json"))
				assert.Contains(t, backupHashes(t, home), sha256.Sum256(fixture(t, "stale-state.json")), "moved, bytes intact")
			},
		},
		{
			// pid 1 runs, but nothing shows it wrote this file.
			name: "state without a start time",
			plant: func(t *testing.T, home string) {
				put(t, home, "state.json", []byte(`{"schema":1,"name":"helios","pid":1}`))
			},
			kinds: []string{recovery.KindStaleState},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.NoFileExists(t, filepath.Join(home, "state.json"))
				require.Len(t, r.Findings, 1)
				assert.Contains(t, r.Findings[0].Detail, "no process start time")
			},
		},
		{
			name:  "torn state",
			plant: func(t *testing.T, home string) { put(t, home, "state.json", fixture(t, "torn-state.json")) },
			kinds: []string{recovery.KindStaleState},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.Contains(t, backupHashes(t, home), sha256.Sum256(fixture(t, "torn-state.json")))
			},
		},
		{
			name: "interrupted update",
			plant: func(t *testing.T, home string) {
				_, err := recovery.Begin(home, "update", "config/base.yaml", "config/personas/new.yaml")
				require.NoError(t, err)
				put(t, home, "config/base.yaml", []byte("name: half-updated\n"))
				put(t, home, "config/personas/new.yaml", []byte("name: new\n"))
			},
			kinds: []string{recovery.KindInterrupted},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.Equal(t, string(fixture(t, "base.yaml")), read(t, home, "config/base.yaml"))
				assert.NoFileExists(t, filepath.Join(home, "config", "personas", "new.yaml"), "absent before: absent after")
			},
		},
		{
			name: "missing dirs",
			plant: func(t *testing.T, home string) {
				require.NoError(t, os.Remove(filepath.Join(home, "checkpoints")))
				require.NoError(t, os.Remove(filepath.Join(home, "backups")))
			},
			kinds: []string{recovery.KindMissingDir, recovery.KindMissingDir},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.DirExists(t, filepath.Join(home, "backups"))
			},
		},
		{
			name:  "corrupt config with a good version in history",
			plant: func(t *testing.T, home string) { put(t, home, "config/base.yaml", fixture(t, "corrupt-base.yaml")) },
			kinds: []string{recovery.KindCorruptConfig},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.Equal(t, string(fixture(t, "base.yaml")), read(t, home, "config/base.yaml"), "restored from git")
				assert.Contains(t, backupHashes(t, home), sha256.Sum256(fixture(t, "corrupt-base.yaml")), "quarantined, bytes intact")
				assert.False(t, r.NeedsUser())
				require.Len(t, r.Findings, 1)
				assert.Contains(t, r.Findings[0].Detail, "base.yaml:")
				assert.NotContains(t, r.Findings[0].Detail, "(", "no advice to do what recovery is doing: %s", r.Findings[0].Detail)
			},
		},
		{
			name: "corrupt config with no good version",
			plant: func(t *testing.T, home string) {
				put(t, home, "config/personas/new.yaml", fixture(t, "corrupt-base.yaml"))
			},
			kinds: []string{recovery.KindCorruptConfig},
			check: func(t *testing.T, home string, r recovery.Report) {
				assert.True(t, r.NeedsUser(), "never silently replaced")
				assert.NoFileExists(t, filepath.Join(home, "config", "personas", "new.yaml"))
				assert.Contains(t, backupHashes(t, home), sha256.Sum256(fixture(t, "corrupt-base.yaml")))
			},
		},
		{
			name:  "uncommitted change",
			plant: func(t *testing.T, home string) { put(t, home, "config/base.yaml", []byte("name: edited\n")) },
			kinds: []string{recovery.KindUncommitted},
			check: func(t *testing.T, home string, r recovery.Report) {
				s, err := gitstore.Open(filepath.Join(home, "config"), nil)
				require.NoError(t, err)
				defer s.Close()
				h, err := s.History("", 1)
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(h[0].Message, "recovered:"))
				assert.Equal(t, "name: edited\n", read(t, home, "config/base.yaml"))
			},
		},
		{
			name:  "empty branch ref",
			plant: func(t *testing.T, home string) { put(t, home, "config/.git/refs/heads/main", nil) },
			kinds: []string{recovery.KindGitRepair},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := newHome(t)
			tc.plant(t, home)

			before := treeHash(t, home)
			dry, err := recovery.Run(t.Context(), recovery.Options{Home: home, DryRun: true})
			require.NoError(t, err)
			assert.Equal(t, before, treeHash(t, home), "a dry run changes nothing")
			for _, k := range tc.kinds {
				assert.Contains(t, kinds(dry), k, "dry run: %s", dry)
			}

			r, err := recovery.Run(t.Context(), recovery.Options{Home: home})
			require.NoError(t, err)
			assert.Equal(t, tc.kinds, kinds(r), "%s", r)
			if tc.check != nil {
				tc.check(t, home, r)
			}
			again, err := recovery.Run(t.Context(), recovery.Options{Home: home})
			require.NoError(t, err)
			assert.True(t, again.Clean(), "a second run finds nothing: %s", again)
		})
	}
}

func TestNotInstalled(t *testing.T) {
	r, err := recovery.Run(t.Context(), recovery.Options{Home: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, []string{recovery.KindNotInstalled}, kinds(r))
}

func TestValidateHook(t *testing.T) {
	home := newHome(t)
	put(t, home, "config/base.yaml", []byte("name: wrong\n")) // valid YAML, invalid for the server
	r, err := recovery.Run(t.Context(), recovery.Options{Home: home, Validate: func(path string, data []byte) error {
		if path == "base.yaml" && !strings.Contains(string(data), "active_persona") {
			return fmt.Errorf("%s: no active_persona", path)
		}
		return nil
	}})
	require.NoError(t, err)
	assert.Equal(t, []string{recovery.KindCorruptConfig}, kinds(r))
	assert.Equal(t, string(fixture(t, "base.yaml")), read(t, home, "config/base.yaml"))
}

func TestReportText(t *testing.T) {
	r := recovery.Report{Home: "/h"}
	assert.Equal(t, "home /h: clean", r.String())
	b, err := r.MarshalJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"home":"/h","findings":[]}`, string(b))
	r.Findings = []recovery.Finding{{Kind: recovery.KindOrphanTemp, Path: "config/.x.mcpkeep-tmp1234567890123456", Action: "removed"}}
	assert.Equal(t, "home /h: found 1:\norphan-temp config/.x.mcpkeep-tmp1234567890123456: removed", r.String())
}

// treeHash hashes every file and directory name in the home.
func treeHash(t *testing.T, home string) string {
	h := sha256.New()
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		fmt.Fprintf(h, "%s %v\n", rel, d.IsDir())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%x\n", sha256.Sum256(b))
		}
		return nil
	})
	require.NoError(t, err)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestFindingsAreLoggedWithTheirRemedy: a server logs what start-up
// recovery did through Options.Logger, once per finding, and a finding
// that needs the user says what to do.
func TestFindingsAreLoggedWithTheirRemedy(t *testing.T) {
	home := newHome(t)
	put(t, home, "config/personas/new.yaml", fixture(t, "corrupt-base.yaml"))
	var buf bytes.Buffer
	r, err := recovery.Run(t.Context(), recovery.Options{Home: home, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, err)
	require.Len(t, r.Findings, 1)
	require.True(t, r.NeedsUser())
	assert.Equal(t, 1, strings.Count(buf.String(), "msg=recovery"), buf.String())
	assert.Contains(t, buf.String(), "kind=corrupt-config path=config/personas/new.yaml")
	assert.Contains(t, buf.String(), `remedy="`+r.Findings[0].Remedy+`"`)
}
