package bootstrap_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

var defaults = fstest.MapFS{
	"base.yaml":             {Data: []byte("name: helios\nactive_persona: default\n")},
	"personas/default.yaml": {Data: []byte("name: default\n")},
}

func spec(home string) bootstrap.Spec {
	return bootstrap.Spec{Home: home, Schema: 1, Defaults: defaults}
}

// copyFixture copies testdata/homes/name into a temp dir; withRepo makes
// its config/ a repository with one commit (a .git cannot live in testdata).
func copyFixture(t *testing.T, name string, withRepo bool) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	src := filepath.Join("..", "testdata", "homes", name)
	require.NoError(t, os.CopyFS(home, os.DirFS(src)))
	if withRepo {
		s, err := gitstore.Init(filepath.Join(home, "config"), nil)
		require.NoError(t, err)
		_, err = s.Commit("install: schema 1")
		require.NoError(t, err)
		s.Close()
	}
	return home
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		repo    bool
		schema  int
		want    bootstrap.State
	}{
		{"", false, 1, bootstrap.Fresh},
		{"fresh-empty", false, 1, bootstrap.Fresh},
		{"fresh-lock-copy", false, 1, bootstrap.Fresh}, // the lock's files, backups/ with a garbage PID file's copy
		{"ready", true, 1, bootstrap.Ready},
		{"ready", true, 0, bootstrap.Ready},
		{"needs-upgrade", true, 2, bootstrap.NeedsUpgrade},
		{"too-new", true, 1, bootstrap.TooNew},
		{"incomplete", false, 1, bootstrap.Incomplete},
		{"incomplete-garbage-stamp", false, 1, bootstrap.Incomplete},
		{"ready", false, 1, bootstrap.Incomplete}, // stamped, but config/ has no repository
	} {
		t.Run(fmt.Sprintf("%s/repo=%t/schema=%d", tc.fixture, tc.repo, tc.schema), func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "missing")
			if tc.fixture != "" {
				home = copyFixture(t, tc.fixture, tc.repo)
			}
			info, err := bootstrap.Detect(home, tc.schema)
			require.NoError(t, err)
			assert.Equal(t, tc.want, info.State, info.Detail)
			if tc.fixture == "ready" && tc.repo {
				assert.Equal(t, 7, info.Boots)
				assert.Equal(t, "v0.1.0", info.ToolkitVersion)
			}
		})
	}
}

func TestFreshInstall(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	res, err := bootstrap.Ensure(t.Context(), spec(home))
	require.NoError(t, err)
	assert.True(t, res.Installed)
	assert.Equal(t, bootstrap.Fresh, res.Before.State)
	assert.Equal(t, bootstrap.Ready, res.After.State)
	assert.Equal(t, 1, res.After.Boots)
	for _, d := range []string{"config", "checkpoints", "backups"} {
		fi, err := os.Stat(filepath.Join(home, d))
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), d)
	}
	fi, err := os.Stat(filepath.Join(home, "config", "personas", "default.yaml"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(home, ".version"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	assert.Equal(t, "1", commitCount(t, home))

	res, err = bootstrap.Ensure(t.Context(), spec(home))
	require.NoError(t, err)
	assert.False(t, res.Installed)
	assert.Equal(t, bootstrap.Ready, res.Before.State)
	assert.Equal(t, 2, res.After.Boots, "every start counts a boot")
	assert.Equal(t, "1", commitCount(t, home), "a restart does not commit")
	stamped, err := bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, stamped.Boots, "the boot is in the stamp")
	assert.Equal(t, res.After.LastBootAt, stamped.LastBootAt, "and so is its time")
	assert.False(t, stamped.LastBootAt.Before(stamped.InstalledAt))
}

// TestEnsureNamesTheServer: the stamp records Spec.Server; a home stamped
// without one (an older mcpkeep) is named by the first start that gives
// one; a start of another server is an *OtherServerError before anything
// in the home changes; a Spec without a name is not judged.
func TestEnsureNamesTheServer(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	_, err := bootstrap.Ensure(t.Context(), spec(home))
	require.NoError(t, err)
	info, err := bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Empty(t, info.Server, "no name given, none recorded")

	named := spec(home)
	named.Server = "notes"
	res, err := bootstrap.Ensure(t.Context(), named)
	require.NoError(t, err)
	assert.Equal(t, "notes", res.After.Server, "an unnamed home is taken by the first name")
	info, err = bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Equal(t, "notes", info.Server)
	stamp, err := os.ReadFile(filepath.Join(home, ".version"))
	require.NoError(t, err)

	other := spec(home)
	other.Server = "helios"
	_, err = bootstrap.Ensure(t.Context(), other)
	var oe *bootstrap.OtherServerError
	require.ErrorAs(t, err, &oe)
	require.ErrorIs(t, err, bootstrap.ErrOtherServer)
	assert.Equal(t, bootstrap.OtherServerError{Home: home, Stamped: "notes", Server: "helios"}, *oe)
	assert.Contains(t, err.Error(), `give "helios" a home of its own`)
	after, err := os.ReadFile(filepath.Join(home, ".version"))
	require.NoError(t, err)
	assert.Equal(t, string(stamp), string(after), "the refused start wrote no boot")

	_, err = bootstrap.Ensure(t.Context(), spec(home))
	require.NoError(t, err, "a Spec without a name is not judged")
	info, err = bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Equal(t, "notes", info.Server, "and keeps the name it found")
}

// TestDeferBoot: with DeferBoot, a start of a ready home leaves the stamp
// alone until RecordBoot writes the boot Ensure returned; an install
// stamps at once, leaving RecordBoot nothing to do.
func TestDeferBoot(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	s := spec(home)
	s.DeferBoot = true
	res, err := bootstrap.Ensure(t.Context(), s)
	require.NoError(t, err)
	require.True(t, res.Installed)
	installed, err := bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Equal(t, bootstrap.Ready, installed.State, "an install is stamped by Ensure, deferred or not")
	assert.Equal(t, 1, installed.Boots)
	require.NoError(t, res.RecordBoot(), "nothing left to record")
	stampPath := filepath.Join(home, ".version")
	before, err := os.ReadFile(stampPath)
	require.NoError(t, err)

	res, err = bootstrap.Ensure(t.Context(), s)
	require.NoError(t, err)
	assert.Equal(t, 2, res.After.Boots, "After holds the boot to record")
	after, err := os.ReadFile(stampPath)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the stamp waits for RecordBoot")

	require.NoError(t, res.RecordBoot())
	stamped, err := bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, stamped.Boots)
	assert.Equal(t, res.After.LastBootAt, stamped.LastBootAt)
	require.NoError(t, res.RecordBoot(), "a second call does not count the boot again")
	stamped, err = bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, stamped.Boots)

	var zero bootstrap.Result
	assert.NoError(t, zero.RecordBoot(), "a Result with nothing deferred")
}

func commitCount(t *testing.T, home string) string {
	out, err := exec.Command("git", "-C", filepath.Join(home, "config"), "rev-list", "--count", "HEAD").CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.TrimSpace(string(out))
}

func TestUserFilesNeverClobbered(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, "config"), 0o700))
	mine := []byte("name: mine\n")
	require.NoError(t, os.WriteFile(filepath.Join(home, "config", "base.yaml"), mine, 0o600))
	res, err := bootstrap.Ensure(t.Context(), spec(home))
	require.NoError(t, err)
	assert.True(t, res.Resumed)
	b, err := os.ReadFile(filepath.Join(home, "config", "base.yaml"))
	require.NoError(t, err)
	assert.Equal(t, mine, b)
}

func TestTooNew(t *testing.T) {
	home := copyFixture(t, "too-new", true)
	before := treeHash(t, home)
	_, err := bootstrap.Ensure(t.Context(), spec(home))
	require.ErrorIs(t, err, bootstrap.ErrTooNew)
	assert.Contains(t, err.Error(), ".version")
	assert.Equal(t, before, treeHash(t, home), "a newer home is left alone")
}

func TestGarbageStampIsQuarantined(t *testing.T) {
	home := copyFixture(t, "incomplete-garbage-stamp", false)
	garbage, err := os.ReadFile(filepath.Join(home, ".version"))
	require.NoError(t, err)
	res, err := bootstrap.Ensure(t.Context(), spec(home))
	require.NoError(t, err)
	assert.True(t, res.Resumed)
	saved, err := filepath.Glob(filepath.Join(home, "backups", ".version.*"))
	require.NoError(t, err)
	require.Len(t, saved, 1, "the unreadable stamp is kept in backups/")
	b, err := os.ReadFile(saved[0])
	require.NoError(t, err)
	assert.Equal(t, garbage, b)
	info, err := bootstrap.Detect(home, 1)
	require.NoError(t, err)
	assert.Equal(t, bootstrap.Ready, info.State)
}

func upgradeSpec(home string, apply func(ctx context.Context, dir string) error) bootstrap.Spec {
	s := spec(home)
	s.Schema = 3
	s.Migrations = []bootstrap.Migration{
		{From: 1, To: 2, Name: "rename tone", Apply: func(ctx context.Context, dir string) error {
			b, err := os.ReadFile(filepath.Join(dir, "prefs.yaml"))
			if err != nil {
				return err
			}
			return atomicfile.WriteFile(filepath.Join(dir, "prefs.yaml"), []byte(strings.ReplaceAll(string(b), "tone", "voice")), 0)
		}},
		{From: 2, To: 3, Name: "second", Apply: apply},
	}
	return s
}

func TestUpgrade(t *testing.T) {
	home := copyFixture(t, "needs-upgrade", true)
	res, err := bootstrap.Ensure(t.Context(), upgradeSpec(home, func(context.Context, string) error { return nil }))
	require.NoError(t, err)
	assert.True(t, res.Upgraded)
	assert.Equal(t, 3, res.After.Schema)
	assert.Equal(t, 4, res.After.Boots)
	b, err := os.ReadFile(filepath.Join(home, "config", "prefs.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "voice: neutral\n", string(b))
	assert.Equal(t, "2", commitCount(t, home))
	backups, _ := filepath.Glob(filepath.Join(home, "backups", "upgrade-v1-*"))
	assert.Len(t, backups, 1)
}

func TestFailingMigrationLeavesHomeAsItWas(t *testing.T) {
	home := copyFixture(t, "needs-upgrade", true)
	// An uncommitted edit too: it must survive the failed upgrade.
	require.NoError(t, os.WriteFile(filepath.Join(home, "config", "notes.txt"), []byte("mine"), 0o600))
	// Modes a user chose for config/ come back too (treeHash leaves them out).
	require.NoError(t, os.Chmod(filepath.Join(home, "config"), 0o750))
	require.NoError(t, os.Chmod(filepath.Join(home, "config", "notes.txt"), 0o640))
	before := treeHash(t, home)
	head := gitHead(t, home)
	_, err := bootstrap.Ensure(t.Context(), upgradeSpec(home, func(ctx context.Context, dir string) error {
		os.WriteFile(filepath.Join(dir, "prefs.yaml"), []byte("half migrated"), 0o600)
		return errors.New("boom")
	}))
	var me *bootstrap.MigrationError
	require.ErrorAs(t, err, &me)
	require.ErrorIs(t, err, bootstrap.ErrMigration)
	assert.Equal(t, "second", me.Migration)
	assert.Equal(t, before, treeHash(t, home), "config/ bytes and .version as they were")
	assert.Equal(t, head, gitHead(t, home))
	for p, mode := range map[string]fs.FileMode{"config": 0o750, "config/notes.txt": 0o640} {
		fi, err := os.Stat(filepath.Join(home, p))
		require.NoError(t, err)
		assert.Equal(t, mode, fi.Mode().Perm(), p)
	}
}

// TestFailingValidateLeavesHomeAsItWas: Spec.Validate sees config/ after
// every migration, and its error fails the upgrade like a failing
// migration: config/ restored byte for byte, HEAD and .version unchanged,
// and the error names the validation and carries its reason.
func TestFailingValidateLeavesHomeAsItWas(t *testing.T) {
	home := copyFixture(t, "needs-upgrade", true)
	require.NoError(t, os.WriteFile(filepath.Join(home, "config", "notes.txt"), []byte("mine"), 0o600))
	before := treeHash(t, home)
	head := gitHead(t, home)
	stamp, err := os.ReadFile(filepath.Join(home, ".version"))
	require.NoError(t, err)
	invalid := errors.New("prefs.yaml: voice must be one of neutral, warm")
	s := upgradeSpec(home, func(ctx context.Context, dir string) error {
		return os.WriteFile(filepath.Join(dir, "prefs.yaml"), []byte("voice: shouty\n"), 0o600)
	})
	var validated string
	s.Validate = func(dir string) error {
		b, err := os.ReadFile(filepath.Join(dir, "prefs.yaml"))
		validated = string(b)
		if err != nil {
			return err
		}
		return invalid
	}

	_, err = bootstrap.Ensure(t.Context(), s)
	var me *bootstrap.MigrationError
	require.ErrorAs(t, err, &me)
	require.ErrorIs(t, err, bootstrap.ErrMigration)
	require.ErrorIs(t, err, invalid)
	assert.Equal(t, "validate", me.Migration)
	assert.Equal(t, [2]int{1, 3}, [2]int{me.From, me.To}, "the whole upgrade failed")
	assert.ErrorContains(t, err, "voice must be one of neutral, warm", "the message says what is wrong")
	assert.Equal(t, "voice: shouty\n", validated, "Validate sees config/ after the migrations")

	assert.Equal(t, before, treeHash(t, home), "config/ bytes as they were")
	assert.Equal(t, head, gitHead(t, home), "no migrate commit")
	b, err := os.ReadFile(filepath.Join(home, ".version"))
	require.NoError(t, err)
	assert.Equal(t, stamp, b, "the stamp still says schema 1")
	info, err := bootstrap.Detect(home, 3)
	require.NoError(t, err)
	assert.Equal(t, bootstrap.NeedsUpgrade, info.State)
}

// TestFailedUpgradesDoNotFillBackups: a server respawned for every client
// retries a failing upgrade at every start. backups/ keeps one copy of the
// failed config/ per pair of schemas, the newest, and no pre-upgrade
// backup once config/ holds its bytes again; the user's files are kept.
func TestFailedUpgradesDoNotFillBackups(t *testing.T) {
	// The second home's path holds a pattern's metacharacter, which
	// backups/ is not globbed with.
	for _, name := range []string{"home", "h[1"} {
		t.Run(name, func(t *testing.T) {
			home := copyFixture(t, "needs-upgrade", true)
			if name != "home" {
				moved := filepath.Join(filepath.Dir(home), name)
				require.NoError(t, os.Rename(home, moved))
				home = moved
			}
			require.NoError(t, os.WriteFile(filepath.Join(home, "config", "notes.txt"), []byte("mine"), 0o600))
			before := treeHash(t, home)
			failing := func(attempt string) func(context.Context, string) error {
				return func(ctx context.Context, dir string) error {
					if err := os.WriteFile(filepath.Join(dir, "prefs.yaml"), []byte(attempt), 0o600); err != nil {
						return err
					}
					return errors.New("boom")
				}
			}
			for _, attempt := range []string{"first", "second", "third"} {
				_, err := bootstrap.Ensure(t.Context(), upgradeSpec(home, failing(attempt)))
				require.ErrorIs(t, err, bootstrap.ErrMigration)
				assert.Equal(t, before, treeHash(t, home), "%s attempt: the home as it was", attempt)
			}
			entries, err := os.ReadDir(filepath.Join(home, "backups"))
			require.NoError(t, err)
			require.Len(t, entries, 1, "one failed copy, no pre-upgrade backup: %v", entries)
			assert.True(t, strings.HasPrefix(entries[0].Name(), "failed-upgrade-v1-v3-"), entries[0].Name())
			b, err := os.ReadFile(filepath.Join(home, "backups", entries[0].Name(), "prefs.yaml"))
			require.NoError(t, err)
			assert.Equal(t, "third", string(b), "the newest failed copy is kept")

			// Another pair of schemas keeps its own copy.
			s := spec(home)
			s.Schema = 2
			s.Migrations = []bootstrap.Migration{{From: 1, To: 2, Name: "only", Apply: failing("to two")}}
			_, err = bootstrap.Ensure(t.Context(), s)
			require.ErrorIs(t, err, bootstrap.ErrMigration)
			entries, err = os.ReadDir(filepath.Join(home, "backups"))
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name()[:len("failed-upgrade-v1-v3")])
			}
			assert.ElementsMatch(t, []string{"failed-upgrade-v1-v2", "failed-upgrade-v1-v3"}, names)
			assert.Equal(t, before, treeHash(t, home))
			b, err = os.ReadFile(filepath.Join(home, "config", "notes.txt"))
			require.NoError(t, err)
			assert.Equal(t, "mine", string(b))
		})
	}
}

func gitHead(t *testing.T, home string) string {
	out, err := exec.Command("git", "-C", filepath.Join(home, "config"), "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// treeHash hashes every file of the home but backups/ (which only grows).
func treeHash(t *testing.T, home string) string {
	h := sha256.New()
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		if d.IsDir() && (rel == "backups" || rel == "checkpoints") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %x\n", rel, sha256.Sum256(b))
		}
		return nil
	})
	require.NoError(t, err)
	return fmt.Sprintf("%x", h.Sum(nil))
}

const homeEnv = "BOOTSTRAP_HOME"

// TestHelperEnsure is a child: it runs Ensure on the home in its
// environment, with whatever failpoints are armed.
func TestHelperEnsure(t *testing.T) {
	home := os.Getenv(homeEnv)
	if home == "" {
		return
	}
	s := spec(home)
	if os.Getenv("BOOTSTRAP_UPGRADE") != "" {
		s = upgradeSpec(home, func(context.Context, string) error { return nil })
	}
	if _, err := bootstrap.Ensure(context.Background(), s); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// killPaths says on which paths of Ensure each failpoint is hit: a first
// install, an upgrade, or both. The gitstore points are those of the one
// commit each path makes.
var killPaths = map[string][]string{
	"bootstrap.after-dirs":           {"install"},
	"bootstrap.after-defaults":       {"install"},
	"bootstrap.after-git-init":       {"install"},
	"bootstrap.after-initial-commit": {"install"},
	"bootstrap.before-migration":     {"upgrade"},
	"bootstrap.after-migration":      {"upgrade"},
	"bootstrap.before-stamp":         {"install", "upgrade"},
	"gitstore.before-objects":        {"install", "upgrade"},
	"gitstore.before-ref":            {"install", "upgrade"},
}

// TestKillAtEveryBootstrapPoint: a first start killed anywhere leaves a
// home the next Ensure completes, with exactly one initial commit and the
// user's files untouched; an upgrade killed anywhere is undone and done
// again, with exactly one migrate commit.
func TestKillAtEveryBootstrapPoint(t *testing.T) {
	for _, p := range failpoint.Names {
		if strings.HasPrefix(p, "bootstrap.") {
			assert.Contains(t, killPaths, p, "say in killPaths on which paths %s is hit", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(killPaths)) {
		require.Contains(t, failpoint.Names, p)
		for _, path := range killPaths[p] {
			t.Run(path+"/"+p, func(t *testing.T) {
				killEnsure(t, path, p)
			})
		}
	}
}

func killEnsure(t *testing.T, path, point string) {
	upgrade := path == "upgrade"
	var home string
	mine := filepath.Join("personas", "default.yaml") // also a default file
	if upgrade {
		home = copyFixture(t, "needs-upgrade", true)
		mine = "notes.txt" // not committed yet
	} else {
		home = filepath.Join(t.TempDir(), "home")
	}
	userFile := filepath.Join(home, "config", mine)
	require.NoError(t, os.MkdirAll(filepath.Dir(userFile), 0o700))
	require.NoError(t, os.WriteFile(userFile, []byte("name: mine\n"), 0o600))

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnsure$")
	cmd.Env = append(os.Environ(), homeEnv+"="+home, failpoint.EnvVar+"="+point+"=kill")
	if upgrade {
		cmd.Env = append(cmd.Env, "BOOTSTRAP_UPGRADE=1")
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the child must be killed at %s: %s", point, out)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed by SIGKILL at %s: %v %s", point, err, out)

	s := spec(home)
	if upgrade {
		s = upgradeSpec(home, func(context.Context, string) error { return nil })
	}
	res, err := bootstrap.Ensure(t.Context(), s)
	require.NoError(t, err)
	assert.Equal(t, bootstrap.Ready, res.After.State)
	b, err := os.ReadFile(userFile)
	require.NoError(t, err)
	assert.Equal(t, "name: mine\n", string(b), "the user's file is untouched")
	if upgrade {
		assert.Equal(t, 3, res.After.Schema)
		b, err := os.ReadFile(filepath.Join(home, "config", "prefs.yaml"))
		require.NoError(t, err)
		assert.Equal(t, "voice: neutral\n", string(b))
		assert.Equal(t, []string{"migrate v1→v3", "install: schema 1"}, commitMessages(t, home),
			"exactly one migrate commit on the history as it was")
		return
	}
	assert.Equal(t, []string{"install: schema 1"}, commitMessages(t, home), "exactly one initial commit")
	_, err = os.Stat(filepath.Join(home, "config", "base.yaml"))
	assert.NoError(t, err, "defaults were written")
}

// commitMessages returns the subjects of config/'s history, newest first.
func commitMessages(t *testing.T, home string) []string {
	out, err := exec.Command("git", "-C", filepath.Join(home, "config"), "log", "--format=%s").CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestUpgradeKilledDuringBackup: a kill while config/ is copied into
// backups/ must not leave an incomplete copy that looks like a backup
// (found by the crash suite); the next Ensure upgrades with one whole one.
func TestUpgradeKilledDuringBackup(t *testing.T) {
	home := copyFixture(t, "needs-upgrade", true)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnsure$")
	// The upgrade's first atomic writes are the backup's files.
	cmd.Env = append(os.Environ(), homeEnv+"="+home, "BOOTSTRAP_UPGRADE=1", failpoint.EnvVar+"=atomicfile.before-rename=kill@3")
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Run(), &ee)
	require.True(t, ee.Sys().(syscall.WaitStatus).Signaled(), "killed during the backup")
	partial, _ := filepath.Glob(filepath.Join(home, "backups", "upgrade-v1-*"))
	require.Len(t, partial, 1, "the interrupted copy")

	res, err := bootstrap.Ensure(t.Context(), upgradeSpec(home, func(context.Context, string) error { return nil }))
	require.NoError(t, err)
	assert.True(t, res.Upgraded)
	backups, _ := filepath.Glob(filepath.Join(home, "backups", "upgrade-v1-*"))
	require.Len(t, backups, 1, "only the whole backup: %v", backups)
	assert.NotEqual(t, partial[0], backups[0])
	b, err := os.ReadFile(filepath.Join(backups[0], "prefs.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "tone: neutral\n", string(b), "the backup holds config/ as it was")
}

func TestSpecErrors(t *testing.T) {
	_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{})
	assert.Error(t, err)
	home := copyFixture(t, "needs-upgrade", true)
	s := spec(home)
	s.Schema = 5 // no migrations to get there
	before := homeFiles(t, home)
	_, err = bootstrap.Ensure(t.Context(), s)
	var se *bootstrap.SpecError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "Migrations", se.Field)
	assert.EqualError(t, err, "bootstrap: Spec.Migrations has no migration from schema 1, the schema of the home "+home+", toward Spec.Schema 5: "+
		"add a bootstrap.Migration{From: 1, To: 5, Apply: ...} that moves the home's files from schema 1 to 5, or keep Spec.Schema at 1; "+
		"the home is left as it was")
	assert.Equal(t, before, homeFiles(t, home), "nothing written")

	s.Migrations = []bootstrap.Migration{{From: 3, To: 5, Apply: func(context.Context, string) error { return nil }}}
	_, err = bootstrap.Ensure(t.Context(), s)
	assert.ErrorContains(t, err, "add a bootstrap.Migration{From: 1, To: 3, Apply: ...}", "the one the chain lacks")
	assert.Equal(t, before, homeFiles(t, home), "nothing written")
}

// homeFiles returns every file below home, with its bytes, and every
// directory, as "path/".
func homeFiles(t *testing.T, home string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	}))
	return out
}

// TestHomeAndDefaultsErrors: a home that is a file, or defaults that
// cannot be read, give an error that names them and says what to do.
func TestHomeAndDefaultsErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "home")
	require.NoError(t, os.WriteFile(file, []byte("not a home"), 0o600))
	for _, tc := range []struct {
		name string
		spec bootstrap.Spec
		want []string // in the error
	}{
		{"home is a file", spec(file), []string{"bootstrap: home " + file + " is not a directory", "move the file away"}},
		{"defaults missing", bootstrap.Spec{Home: filepath.Join(t.TempDir(), "home"), Schema: 1, Defaults: os.DirFS(filepath.Join(t.TempDir(), "missing"))},
			[]string{"bootstrap: read the default files (Spec.Defaults): stat .: ", "os.DirFS of a directory that exists"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bootstrap.Ensure(t.Context(), tc.spec)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
	_, err := bootstrap.Detect(file, 1)
	assert.ErrorContains(t, err, "bootstrap: home "+file+" is not a directory")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "not a home", string(b), "the file is left alone")
}

// TestMigrationsAreChecked: a Spec whose migrations cannot form one chain
// is refused before the home is touched, naming the migration and what is
// wrong with it (a nil Apply used to panic in the middle of the upgrade).
func TestMigrationsAreChecked(t *testing.T) {
	ok := func(context.Context, string) error { return nil }
	for _, tc := range []struct {
		name       string
		migrations []bootstrap.Migration
		want       []string // in the error
	}{
		{"nil Apply", []bootstrap.Migration{{From: 1, To: 2, Name: "one", Apply: ok}, {From: 2, To: 3, Name: "two"}},
			[]string{`"two", v2→v3`, "Apply is nil"}},
		{"From not below To", []bootstrap.Migration{{From: 1, To: 3, Name: "one", Apply: ok}, {From: 3, To: 3, Name: "same", Apply: ok}},
			[]string{`"same", v3→v3`, "From must be below To"}},
		{"backwards", []bootstrap.Migration{{From: 3, To: 1, Name: "back", Apply: ok}},
			[]string{`"back", v3→v1`, "From must be below To"}},
		{"From below 1", []bootstrap.Migration{{From: 0, To: 3, Name: "zero", Apply: ok}},
			[]string{`"zero", v0→v3`, "From must be 1 or more"}},
		{"past the schema", []bootstrap.Migration{{From: 1, To: 4, Name: "far", Apply: ok}},
			[]string{`"far", v1→v4`, "past the current schema 3"}},
		{"gap", []bootstrap.Migration{{From: 1, To: 2, Name: "one", Apply: ok}}, // nothing from 2 to 3
			[]string{`"one", v1→v2`, "no migration starts at v2"}},
		{"two from one schema", []bootstrap.Migration{{From: 1, To: 2, Name: "one", Apply: ok}, {From: 2, To: 3, Name: "two", Apply: ok}, {From: 1, To: 3, Name: "shortcut", Apply: ok}},
			[]string{`"shortcut", v1→v3`, `"one" also starts at v1`}},
		{"unnamed", []bootstrap.Migration{{From: 1, To: 3, Apply: ok}, {From: 2, To: 3}},
			[]string{`Spec.Migrations[1] (migration "#1", v2→v3)`, "Apply is nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := copyFixture(t, "needs-upgrade", true)
			before := treeHash(t, home)
			s := spec(home)
			s.Schema, s.Migrations = 3, tc.migrations
			_, err := bootstrap.Ensure(t.Context(), s)
			var se *bootstrap.SpecError
			require.ErrorAs(t, err, &se)
			assert.True(t, strings.HasPrefix(se.Field, "Migrations["), se.Field)
			assert.NotErrorIs(t, err, bootstrap.ErrMigration, "no migration ran")
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
			assert.Equal(t, before, treeHash(t, home), "the home is not touched")
			backups, err := os.ReadDir(filepath.Join(home, "backups"))
			if !errors.Is(err, fs.ErrNotExist) {
				require.NoError(t, err)
				assert.Empty(t, backups, "nothing was backed up")
			}
		})
	}
}

// TestSpecIsChecked: a Spec without a Home or a Schema, or with a directory
// outside the home, is refused with a *SpecError naming the field, before
// anything is written; Check says the same without touching anything.
func TestSpecIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*bootstrap.Spec)
		field  string
	}{
		{"no home", func(s *bootstrap.Spec) { s.Home = "" }, "Home"},
		{"zero schema", func(s *bootstrap.Spec) { s.Schema = 0 }, "Schema"},
		{"negative schema", func(s *bootstrap.Spec) { s.Schema = -1 }, "Schema"},
		{"a directory above the home", func(s *bootstrap.Spec) { s.Dirs = []string{"cache", "../elsewhere"} }, "Dirs[1]"},
		{"an absolute directory", func(s *bootstrap.Spec) { s.Dirs = []string{"/tmp/x"} }, "Dirs[0]"},
		{"an empty directory", func(s *bootstrap.Spec) { s.Dirs = []string{""} }, "Dirs[0]"},
		{"the stamp", func(s *bootstrap.Spec) { s.Dirs = []string{"cache", "config/sub", ".version"} }, "Dirs[2]"},
		{"the state file", func(s *bootstrap.Spec) { s.Dirs = []string{"state.json/x"} }, "Dirs[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			s := spec(home)
			tc.change(&s)
			var se *bootstrap.SpecError
			require.ErrorAs(t, s.Check(), &se)
			assert.Equal(t, tc.field, se.Field)
			_, err := bootstrap.Ensure(t.Context(), s)
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.field, se.Field)
			assert.NoDirExists(t, home, "nothing is written")
		})
	}
	require.NoError(t, spec(t.TempDir()).Check())
}

func TestIsLayoutName(t *testing.T) {
	for _, name := range []string{".version", "config", "checkpoints", "backups", ".upgrading", ".lock", ".lock.flock", "state.json", "etcd.yaml"} {
		assert.True(t, bootstrap.IsLayoutName(name), name)
	}
	for _, name := range []string{"notes.txt", "Documents", ".git", "config.yaml", ""} {
		assert.False(t, bootstrap.IsLayoutName(name), name)
	}
}
