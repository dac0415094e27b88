package recovery_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// update rewrites the golden files of TestRun.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/recovery/golden")

// testdata is the module's fixture directory.
var testdata = filepath.Join("..", "testdata")

func fixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join(testdata, "recovery", name))
	require.NoError(t, err)
	return b
}

// newHome makes an installed home: config/ committed as "install" with
// base.yaml and personas/default.yaml from testdata/recovery and prefs.json
// from testdata/json, and empty checkpoints/ and backups/. (A .git cannot
// live in testdata.)
func newHome(t *testing.T) string {
	home := filepath.Join(t.TempDir(), "home")
	for _, d := range []string{"config/personas", "checkpoints", "backups"} {
		require.NoError(t, os.MkdirAll(filepath.Join(home, d), 0o700))
	}
	put(t, home, "config/base.yaml", fixture(t, "base.yaml"))
	put(t, home, "config/personas/default.yaml", fixture(t, "default.yaml"))
	prefs, err := os.ReadFile(filepath.Join(testdata, "json", "valid.json"))
	require.NoError(t, err)
	put(t, home, "config/prefs.json", prefs)
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

// overlay copies the files of testdata/recovery/cases/name (if there is
// such a directory) into the home, at the same paths, except that a path
// element "dot-git" stands for ".git", which git cannot hold.
func overlay(t *testing.T, home, name string) {
	src := filepath.Join(testdata, "recovery", "cases", name)
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		for i, part := range parts {
			if part == "dot-git" {
				parts[i] = ".git"
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		put(t, home, strings.Join(parts, "/"), b)
		return nil
	})
	require.NoError(t, err)
}

// A runCase is one home TestRun repairs. The home is built by a documented
// setup step, from fixtures only: newHome, then the overlay of
// testdata/recovery/cases/<name>/, then the files of plant, then remove.
type runCase struct {
	name string
	// plant puts shared fixtures into the home: home path → path under
	// testdata.
	plant map[string]string
	// remove lists paths removed after that: a missing directory cannot
	// be a fixture.
	remove []string
	// defaults sets Options.Defaults to testdata/recovery/defaults, and
	// allowDefaults Options.AllowDefaults.
	defaults, allowDefaults bool
	// unreadable is a path whose mode is set to 0 (git holds no modes).
	// Root reads it all the same, so as root Run runs in a child process
	// as an unprivileged user (see runAsNobody).
	unreadable string
}

// TestRun builds a home for each case, runs a dry run and then Run, and
// compares with testdata/recovery/golden/<name>.json (rewritten by
// -update) both reports, every file of the home after Run (config/.git
// aside: the git CLI checks it) and the config history. Timestamps, hashes
// and the home's path are normalized. It also checks that the dry run
// changed nothing, that every file Run moved is in backups/ with its bytes,
// and that a second Run finds only what the first could not act on.
func TestRun(t *testing.T) {
	cases := []runCase{
		// The user's new config/.keep is not a temp file: it is kept and
		// committed. Nor is a name that merely ends in digits.
		{name: "orphan-temps"},
		// A kill while an upgrade copies config/ into backups/ (found by
		// the crash suite): the copy's .git is not gitstore's.
		{name: "temp-in-a-backups-git"},
		// A kill during go-git's object write, then an upgrade's restore
		// moving that config/ aside (found by the crash suite); go-git's
		// names mean nothing outside a .git.
		{name: "go-git-temp-in-a-backups-git"},
		{name: "stale-git-lock"},
		// Moved aside with its dead bearer token redacted.
		{name: "stale-state"},
		// A server that keeps dying: the oldest copies go.
		{name: "stale-state-copies"},
		// pid 1 runs, but nothing shows it wrote this file.
		{name: "state-without-start-time"},
		{name: "torn-state"},
		{name: "torn-state-with-token"},
		// Rolled back from the pre-images: absent before, absent after.
		{name: "interrupted-update"},
		// Two updates of base.yaml left open, the second begun while the
		// first was: the first one's pre-image is the file as it was.
		{name: "overlapping-checkpoints"},
		// Begin never wrote its manifest: nothing changed under it.
		{name: "unfinished-checkpoint"},
		// A manifest that does not parse: the user compares by hand.
		{name: "corrupt-checkpoint"},
		{name: "missing-dirs", remove: []string{"checkpoints", "backups"}},
		// No config repository: an install a crash interrupted, which
		// bootstrap finishes; Run looks no further.
		{name: "not-installed", remove: []string{"config/.git"}},
		{name: "corrupt-yaml-with-a-good-version", plant: map[string]string{"config/base.yaml": "recovery/corrupt-base.yaml"}},
		// Never silently replaced: quarantined for the user.
		{name: "corrupt-yaml-never-good", plant: map[string]string{"config/personas/new.yaml": "yaml/truncated.yaml"}},
		{name: "corrupt-json-with-a-good-version", plant: map[string]string{"config/prefs.json": "json/torn.json"}},
		// A default exists, but AllowDefaults is not set: quarantined.
		{name: "corrupt-json-never-good", plant: map[string]string{"config/tools.json": "json/bad-literal.json"}, defaults: true},
		{name: "corrupt-json-never-good-allow-defaults", plant: map[string]string{"config/tools.json": "json/bad-literal.json"},
			defaults: true, allowDefaults: true},
		{name: "uncommitted-change"},
		{name: "empty-branch-ref"},
		{name: "corrupt-git-config"},
		// Reported for the user; the edit of base.yaml is not committed
		// while a file of the tree cannot be read.
		{name: "unreadable", unreadable: "config/personas/default.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := newHome(t)
			overlay(t, home, tc.name)
			for dst, src := range tc.plant {
				b, err := os.ReadFile(filepath.Join(testdata, filepath.FromSlash(src)))
				require.NoError(t, err)
				put(t, home, dst, b)
			}
			for _, p := range tc.remove {
				require.NoError(t, os.RemoveAll(filepath.Join(home, p)))
			}
			opts := recovery.Options{Home: home, AllowDefaults: tc.allowDefaults}
			if tc.defaults {
				opts.Defaults = os.DirFS(filepath.Join(testdata, "recovery", "defaults"))
			}
			run := func(opts recovery.Options) (recovery.Report, error) { return recovery.Run(t.Context(), opts) }
			if tc.unreadable != "" {
				require.NoError(t, os.Chmod(filepath.Join(home, filepath.FromSlash(tc.unreadable)), 0))
				if os.Geteuid() == 0 {
					run = runAsNobody(t, home)
				}
			}
			checkRun(t, tc.name, opts, run)
		})
	}
}

const (
	runAsHomeEnv = "RECOVERY_RUN_AS_HOME"
	runAsDryEnv  = "RECOVERY_RUN_AS_DRY"
)

// TestHelperRunAs is a child: it runs recovery.Run on the home in its
// environment and prints the Report as JSON.
func TestHelperRunAs(t *testing.T) {
	home := os.Getenv(runAsHomeEnv)
	if home == "" {
		return
	}
	r, err := recovery.Run(t.Context(), recovery.Options{Home: home, DryRun: os.Getenv(runAsDryEnv) != ""})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// nobody is the unprivileged user runAsNobody runs Run as.
const nobody = 65534

// runAsNobody returns a function that runs Run on home in a child process
// as the unprivileged user nobody, after giving home to nobody: root
// ignores file modes, and an unreadable file is what the test is about.
// Only Home and DryRun of the options reach the child.
func runAsNobody(t *testing.T, home string) func(recovery.Options) (recovery.Report, error) {
	// The child must reach the home and its own binary.
	for dir := filepath.Dir(home); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		require.NoError(t, os.Chmod(dir, 0o711))
	}
	require.NoError(t, filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}))
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(filepath.Dir(home), "recovery.test")
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	return func(opts recovery.Options) (recovery.Report, error) {
		require.Equal(t, recovery.Options{Home: home, DryRun: opts.DryRun}, opts, "only Home and DryRun reach the child")
		cmd := exec.Command(bin, "-test.run=^TestHelperRunAs$")
		cmd.Dir = filepath.Dir(home)
		cmd.Env = append(os.Environ(), runAsHomeEnv+"="+home)
		if opts.DryRun {
			cmd.Env = append(cmd.Env, runAsDryEnv+"=1")
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			if errors.Is(err, syscall.EPERM) {
				t.Skipf("root cannot switch to uid %d here (%v): run as a user other than root to test an unreadable file", nobody, err)
			}
			return recovery.Report{}, fmt.Errorf("child as uid %d: %w: %s%s", nobody, err, out, stderr.Bytes())
		}
		var r recovery.Report
		err = json.Unmarshal(out, &r)
		return r, err
	}
}

// golden is what a golden file of TestRun holds.
type golden struct {
	DryRun recovery.Report      `json:"dry_run"`
	Report recovery.Report      `json:"report"`
	Files  map[string]*fileInfo `json:"files"` // after Run; directories end in "/"
	Log    []string             `json:"log"`   // config/'s commits, newest first
}

type fileInfo struct {
	Mode string `json:"mode"`
	Data string `json:"data,omitempty"` // the bytes, or their sha256 if not UTF-8
}

// checkRun runs the checks of TestRun on the home of opts, calling run
// for recovery.Run.
func checkRun(t *testing.T, name string, opts recovery.Options, run func(recovery.Options) (recovery.Report, error)) {
	home := opts.Home
	before := files(t, home)
	treeBefore := treeHash(t, home)
	dry := opts
	dry.DryRun = true
	dryReport, err := run(dry)
	require.NoError(t, err)
	assert.Equal(t, treeBefore, treeHash(t, home), "a dry run changes nothing")

	report, err := run(opts)
	require.NoError(t, err)
	t.Logf("%s", report)
	n := newNormalizer(home, before)
	got := golden{DryRun: n.report(dryReport), Report: n.report(report), Files: map[string]*fileInfo{}, Log: gitLog(t, home)}
	for rel, f := range files(t, home) {
		got.Files[n.text(rel)] = f
	}
	compareGolden(t, name, got)

	// Every file Run moved is in backups/, bytes intact (a dead server's
	// bearer token aside).
	for _, f := range report.Findings {
		m := movedTo.FindStringSubmatch(f.Action)
		if m == nil {
			continue
		}
		saved, err := os.ReadFile(filepath.Join(home, filepath.FromSlash(m[1])))
		require.NoError(t, err, "%s %s: %s", f.Kind, f.Path, f.Action)
		require.Contains(t, before, f.Path)
		want := before[f.Path].Data
		if strings.Contains(f.Action, "with its bearer token redacted") {
			want = tokenValue.ReplaceAllString(want, "${1}redacted")
			assert.NotEqual(t, before[f.Path].Data, want, "%s: a token to redact", f.Path)
		}
		assert.Equal(t, want, data(saved), "%s: moved with its bytes", f.Path)
	}

	again, err := run(opts)
	require.NoError(t, err)
	var left []recovery.Finding
	for _, f := range report.Findings {
		if f.Action == "none" {
			left = append(left, f)
		}
	}
	assert.Equal(t, left, again.Findings, "a second run finds only what the first could not act on: %s", again)
	if _, err := os.Stat(filepath.Join(home, "config", ".git")); err == nil {
		gitCLI(t, home, "fsck", "--full", "--strict")
	}
}

// movedTo matches the action of a finding whose file Run moved.
var movedTo = regexp.MustCompile(`^(?:moved|quarantined) to (backups/[^ ;,]+)`)

// tokenValue matches the value of a state file's bearer token.
var tokenValue = regexp.MustCompile(`("token"\s*:\s*")[^"]+`)

// compareGolden compares got with testdata/recovery/golden/name.json, or
// rewrites that with -update.
func compareGolden(t *testing.T, name string, got golden) {
	b, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	b = append(b, '\n')
	path := filepath.Join(testdata, "recovery", "golden", name+".json")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run TestRun -update to write the golden file")
	assert.Equal(t, string(want), string(b), "golden file %s (go test -run TestRun -update rewrites it)", path)
}

var (
	timestamp   = regexp.MustCompile(`[0-9]{8}T[0-9]{6}\.[0-9]{9}Z`)
	fullHash    = regexp.MustCompile(`\b[0-9a-f]{40}\b`)
	shortCommit = regexp.MustCompile(`\b(commit|committed as) [0-9a-f]{12}\b`)
)

// A normalizer replaces what changes from run to run: the home's path, the
// times in the names Run gives (not those of fixtures), commit hashes.
type normalizer struct {
	home  string
	fixed map[string]bool // times in the names of the home before Run
}

func newNormalizer(home string, before map[string]*fileInfo) *normalizer {
	n := &normalizer{home: home, fixed: map[string]bool{}}
	for rel := range before {
		for _, ts := range timestamp.FindAllString(rel, -1) {
			n.fixed[ts] = true
		}
	}
	return n
}

func (n *normalizer) text(s string) string {
	s = strings.ReplaceAll(s, n.home, "$HOME")
	s = timestamp.ReplaceAllStringFunc(s, func(ts string) string {
		if n.fixed[ts] {
			return ts
		}
		return "{time}"
	})
	s = fullHash.ReplaceAllString(s, "{hash}")
	return shortCommit.ReplaceAllString(s, "$1 {hash}")
}

func (n *normalizer) report(r recovery.Report) recovery.Report {
	r.Home = n.text(r.Home)
	r.Findings = slices.Clone(r.Findings)
	for i, f := range r.Findings {
		f.Path, f.Action = n.text(f.Path), n.text(f.Action)
		f.Detail, f.Remedy = n.text(f.Detail), n.text(f.Remedy)
		r.Findings[i] = f
	}
	return r
}

// files lists every file and directory of the home but config/.git, by
// slash-separated path relative to the home.
func files(t *testing.T, home string) map[string]*fileInfo {
	return walk(t, home, false)
}

// walk lists every file and directory of the home, but config/.git unless
// withGit. A file of mode 0 is listed without its bytes (only root could
// read them).
func walk(t *testing.T, home string, withGit bool) map[string]*fileInfo {
	out := map[string]*fileInfo{}
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == home {
			return err
		}
		rel, err := filepath.Rel(home, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "config/.git" && !withGit {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = &fileInfo{Mode: info.Mode().String()}
			return nil
		}
		if info.Mode().Perm() == 0 || !info.Mode().IsRegular() {
			// Not read: only root could, or it is a link, pipe or socket.
			f := &fileInfo{Mode: info.Mode().String()}
			if info.Mode().Type() == fs.ModeSymlink {
				f.Data, _ = os.Readlink(p)
			}
			out[rel] = f
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = &fileInfo{Mode: info.Mode().String(), Data: data(b)}
		return nil
	})
	require.NoError(t, err)
	return out
}

// data renders bytes for a golden file: as they are, or as their sha256
// when they are not UTF-8 text.
func data(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// gitLog returns the subjects of config/'s commits, newest first.
func gitLog(t *testing.T, home string) []string {
	if _, err := os.Stat(filepath.Join(home, "config", ".git")); err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(gitCLI(t, home, "log", "--format=%s")), "\n")
}

func gitCLI(t *testing.T, home string, args ...string) string {
	// The unreadable case's repository belongs to another user.
	args = append([]string{"-C", filepath.Join(home, "config"), "-c", "safe.directory=*"}, args...)
	out, err := exec.Command("git", args...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
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

// treeHash hashes every file and directory of the home, with its mode
// and bytes.
func treeHash(t *testing.T, home string) string {
	b, err := json.Marshal(walk(t, home, true))
	require.NoError(t, err)
	return fmt.Sprintf("%x", sha256.Sum256(b))
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

// TestRunAndOpen: the store RunAndOpen hands on is the repository it
// repaired, open and usable; none for a home not installed; a read-only
// one for a dry run.
func TestRunAndOpen(t *testing.T) {
	home := newHome(t)
	put(t, home, "config/personas/default.yaml", []byte("name: default\npreferences:\n  tone: warm\n"))

	report, store, err := recovery.RunAndOpen(t.Context(), recovery.Options{Home: home, DryRun: true})
	require.NoError(t, err)
	require.NotNil(t, store)
	assert.Equal(t, []string{recovery.KindUncommitted}, kinds(report))
	_, err = store.Commit("no")
	require.ErrorIs(t, err, gitstore.ErrReadOnly, "a dry run's store is read-only")
	require.NoError(t, store.Close())

	report, store, err = recovery.RunAndOpen(t.Context(), recovery.Options{Home: home})
	require.NoError(t, err)
	require.NotNil(t, store)
	defer store.Close()
	assert.Equal(t, []string{recovery.KindUncommitted}, kinds(report))
	dirty, err := store.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty, "the store is the repository recovery committed in")
	put(t, home, "config/personas/default.yaml", []byte("name: default\npreferences:\n  tone: cool\n"))
	hash, err := store.Commit("after recovery")
	require.NoError(t, err)
	assert.NotEmpty(t, hash, "and it commits")

	_, store, err = recovery.RunAndOpen(t.Context(), recovery.Options{Home: filepath.Join(t.TempDir(), "none")})
	require.NoError(t, err)
	assert.Nil(t, store, "no repository, no store")
}

// TestMoveStaleState: MoveStaleState does Run's stale-state step alone:
// with DryRun it only reports, and then it moves the dead server's state
// file to backups/ and reports the same finding Run does.
func TestMoveStaleState(t *testing.T) {
	home := newHome(t)
	overlay(t, home, "stale-state")
	state := filepath.Join(home, statefile.FileName)
	dry, err := recovery.MoveStaleState(recovery.Options{Home: home, DryRun: true})
	require.NoError(t, err)
	require.Len(t, dry.Findings, 1)
	assert.Equal(t, recovery.KindStaleState, dry.Findings[0].Kind)
	assert.FileExists(t, state, "a dry run moves nothing")

	got, err := recovery.MoveStaleState(recovery.Options{Home: home})
	require.NoError(t, err)
	require.Len(t, got.Findings, 1)
	assert.Equal(t, recovery.KindStaleState, got.Findings[0].Kind)
	assert.NoFileExists(t, state)
	moved, err := filepath.Glob(filepath.Join(home, recovery.BackupsDir, "stale-*"))
	require.NoError(t, err)
	assert.Len(t, moved, 1)

	again, err := recovery.MoveStaleState(recovery.Options{Home: home})
	require.NoError(t, err)
	assert.Empty(t, again.Findings, "nothing is left to move")
}

// TestQuarantineOfALongPath: a corrupt file whose path, made a backup's
// name, would pass the 255 bytes a file name may have (a name of 220
// bytes in a directory) is still moved to backups/, under a name that
// fits and ends with the end of the file's name; a start does not fail on
// it.
func TestQuarantineOfALongPath(t *testing.T) {
	home := newHome(t)
	name := strings.Repeat("n", 215) + ".yaml"
	rel := "config/notes/deep/" + name
	put(t, home, rel, []byte("title: [broken\n"))
	r, err := recovery.Run(t.Context(), recovery.Options{Home: home})
	require.NoError(t, err)
	assert.Equal(t, []string{recovery.KindCorruptConfig}, kinds(r))
	assert.NoFileExists(t, filepath.Join(home, filepath.FromSlash(rel)))
	entries, err := os.ReadDir(filepath.Join(home, recovery.BackupsDir))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	got := entries[0].Name()
	assert.LessOrEqual(t, len(got), 255)
	assert.True(t, strings.HasSuffix(got, name[len(name)-150:]), "the name's end: %s", got)
	data, err := os.ReadFile(filepath.Join(home, recovery.BackupsDir, got))
	require.NoError(t, err)
	assert.Equal(t, "title: [broken\n", string(data), "its bytes kept")
}
