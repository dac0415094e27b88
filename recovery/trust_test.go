package recovery_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/recovery"
)

// outsideSecret is a file outside the home that links in config/ point to:
// nothing recovery reports, moves or commits may hold its bytes.
const outsideSecret = "-----BEGIN OPENSSH PRIVATE KEY----- 7c1e\n"

// hostile is one entry planted in config/ and what recovery must make of
// it.
type hostile struct {
	rel    string // under config/
	make   func(t *testing.T, path string)
	kind   string // the finding's Kind
	detail string // in the finding's Detail
	mode   os.FileMode
	good   bool // a good version is in history: restored
}

// TestHostileEntries: a link to a file outside the home, one to a file
// inside it, one to a directory outside, a link that replaced a committed
// file, a fifo, a socket, a directory named like a config file, a file over
// the size limit and an alias bomb are each quarantined into backups/ with a
// finding and a remedy, moved as what they are (a link as a link, its
// target untouched); the committed file is restored from git; nothing
// blocks; nothing the report says or history holds carries the outside
// file's bytes, and no commit holds a mode 120000 entry.
func TestHostileEntries(t *testing.T) {
	home := newHome(t)
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "id_ed25519")
	require.NoError(t, os.WriteFile(outside, []byte(outsideSecret), 0o600))
	link := func(target string) func(*testing.T, string) {
		return func(t *testing.T, p string) { require.NoError(t, os.Symlink(target, p)) }
	}
	cases := []hostile{
		{rel: "personas/out.yaml", make: link(outside), kind: recovery.KindRefusedFile,
			detail: `a symbolic link to "` + outside + `", not a regular file (links are never followed)`, mode: os.ModeSymlink},
		{rel: "personas/in.yaml", make: link("default.yaml"), kind: recovery.KindRefusedFile,
			detail: `a symbolic link to "default.yaml"`, mode: os.ModeSymlink},
		{rel: "linked", make: link(outsideDir), kind: recovery.KindRefusedFile, detail: "a symbolic link to", mode: os.ModeSymlink},
		{rel: "base.yaml", make: func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(outside, p))
		}, kind: recovery.KindRefusedFile, detail: "a symbolic link", mode: os.ModeSymlink, good: true},
		{rel: "personas/pipe.yaml", make: func(t *testing.T, p string) { require.NoError(t, syscall.Mkfifo(p, 0o600)) },
			kind: recovery.KindRefusedFile, detail: "a named pipe (fifo), not a regular file", mode: os.ModeNamedPipe},
		{rel: "s.json", make: func(t *testing.T, p string) {
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("no unix socket at %s: %v", p, err)
			}
			t.Cleanup(func() { ln.Close() })
		}, kind: recovery.KindRefusedFile, detail: "a socket, not a regular file", mode: os.ModeSocket},
		{rel: "personas/dir.yaml", make: func(t *testing.T, p string) {
			require.NoError(t, os.MkdirAll(filepath.Join(p, "inner"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(p, "inner", "x.yaml"), []byte("x: 1\n"), 0o600))
		}, kind: recovery.KindRefusedFile, detail: "a directory where a config file belongs", mode: os.ModeDir},
		{rel: "personas/big.yaml", make: func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte("name: big\nx: "+strings.Repeat("y", 2<<20)+"\n"), 0o600))
		}, kind: recovery.KindRefusedFile, detail: "2097166 bytes, more than the 1048576 a config file may have"},
		{rel: "personas/bomb.yaml", make: func(t *testing.T, p string) {
			var b strings.Builder
			b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
			for i := 1; i < 9; i++ {
				r := fmt.Sprintf("*a%d", i-1)
				fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(r+", ", 8)+r)
			}
			require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o600))
		}, kind: recovery.KindCorruptConfig, detail: "alias bomb"},
	}
	for _, c := range cases {
		c.make(t, filepath.Join(home, "config", filepath.FromSlash(c.rel)))
	}
	treeBefore := treeHash(t, home)

	run := func(dry bool) recovery.Report {
		t.Helper()
		done := make(chan struct{})
		var report recovery.Report
		var err error
		go func() {
			defer close(done)
			report, err = recovery.Run(t.Context(), recovery.Options{Home: home, DryRun: dry})
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("recovery still blocked after 60s")
		}
		require.NoError(t, err)
		return report
	}
	dry := run(true)
	assert.Equal(t, treeBefore, treeHash(t, home), "a dry run changes nothing")
	report := run(false)
	t.Logf("%s", report)
	for _, r := range []recovery.Report{dry, report} {
		text, err := json.Marshal(r)
		require.NoError(t, err)
		assert.NotContains(t, string(text), "PRIVATE KEY", "the report holds nothing of the outside file")
		assert.NotContains(t, r.String(), "PRIVATE KEY")
	}

	for _, c := range cases {
		rel := "config/" + c.rel
		f, ok := finding(report, rel)
		if !assert.True(t, ok, "a finding for %s in %s", rel, report) {
			continue
		}
		assert.Equal(t, c.kind, f.Kind, rel)
		assert.Contains(t, f.Detail, c.detail, rel)
		assert.NotEmpty(t, f.Remedy, "%s: a remedy", rel)
		assert.Equal(t, !c.good, f.NeedsUser, rel)
		df, ok := finding(dry, rel)
		if assert.True(t, ok, "the dry run finds %s", rel) {
			assert.True(t, strings.HasPrefix(df.Action, "would be quarantined"), "%s: %s", rel, df.Action)
		}
		m := movedTo.FindStringSubmatch(f.Action)
		if !assert.NotNil(t, m, "%s: %s", rel, f.Action) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(home, filepath.FromSlash(m[1])))
		require.NoError(t, err, rel)
		assert.Equal(t, c.mode, fi.Mode().Type(), "%s is moved as what it is", rel)
		if c.good {
			assert.Contains(t, f.Action, "restored from commit", rel)
			fi, err := os.Lstat(filepath.Join(home, filepath.FromSlash(rel)))
			require.NoError(t, err)
			assert.True(t, fi.Mode().IsRegular(), "%s restored as a regular file", rel)
			assert.Equal(t, string(fixture(t, "base.yaml")), read(t, home, rel))
		} else {
			_, err := os.Lstat(filepath.Join(home, filepath.FromSlash(rel)))
			assert.ErrorIs(t, err, os.ErrNotExist, "%s is gone from config/", rel)
		}
	}
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, outsideSecret, string(b), "a link's target is left alone")

	assert.NotContains(t, gitCLI(t, home, "ls-files", "-s"), "120000")
	assert.NotContains(t, gitCLI(t, home, "log", "-p", "--all"), "PRIVATE KEY")
	assert.Empty(t, gitCLI(t, home, "status", "--porcelain"), "nothing left uncommitted")
	again := run(false)
	assert.True(t, again.Clean(), "a second run finds nothing: %s", again)
}

func finding(r recovery.Report, path string) (recovery.Finding, bool) {
	for _, f := range r.Findings {
		if f.Path == path {
			return f, true
		}
	}
	return recovery.Finding{}, false
}

// TestMaxFileSizeOption: Options.MaxFileSize sets the limit, for the file
// and for the versions in history it would restore.
func TestMaxFileSizeOption(t *testing.T) {
	home := newHome(t)
	base := read(t, home, "config/base.yaml")
	put(t, home, "config/base.yaml", []byte(base+"# "+strings.Repeat("x", 100)+"\n"))
	report, err := recovery.Run(t.Context(), recovery.Options{Home: home, MaxFileSize: int64(len(base) + 10)})
	require.NoError(t, err)
	f, ok := finding(report, "config/base.yaml")
	require.True(t, ok, "%s", report)
	assert.Equal(t, recovery.KindRefusedFile, f.Kind)
	assert.Contains(t, f.Action, "restored from commit")
	assert.Equal(t, base, read(t, home, "config/base.yaml"))

	report, err = recovery.Run(t.Context(), recovery.Options{Home: home, MaxFileSize: 10})
	require.NoError(t, err)
	f, ok = finding(report, "config/base.yaml")
	require.True(t, ok, "%s", report)
	assert.True(t, f.NeedsUser, "no version in history is small enough")
	assert.Contains(t, f.Remedy, "at most 10 bytes")
}

// TestStateFileThatIsNotAFile: a state.json that is a fifo, or a link to a
// file outside the home, is moved to backups/ as it is, without waiting on
// the fifo or reading the link's target.
func TestStateFileThatIsNotAFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.json")
	require.NoError(t, os.WriteFile(outside, []byte(`{"token": "`+outsideSecret+`"}`), 0o600))
	for name, plant := range map[string]func(string) error{
		"fifo": func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"link": func(p string) error { return os.Symlink(outside, p) },
	} {
		t.Run(name, func(t *testing.T) {
			home := newHome(t)
			state := filepath.Join(home, "state.json")
			require.NoError(t, plant(state))
			done := make(chan struct{})
			var report recovery.Report
			var err error
			go func() {
				defer close(done)
				report, err = recovery.Run(t.Context(), recovery.Options{Home: home})
			}()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("recovery still blocked after 60s")
			}
			require.NoError(t, err)
			f, ok := finding(report, "state.json")
			require.True(t, ok, "%s", report)
			assert.Equal(t, recovery.KindStaleState, f.Kind)
			assert.NotContains(t, report.String(), "PRIVATE KEY")
			m := movedTo.FindStringSubmatch(f.Action)
			require.NotNil(t, m, f.Action)
			fi, err := os.Lstat(filepath.Join(home, filepath.FromSlash(m[1])))
			require.NoError(t, err)
			assert.False(t, fi.Mode().IsRegular(), "moved as what it is: %v", fi.Mode())
			_, err = os.Lstat(state)
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}
