package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

func TestRemedy(t *testing.T) {
	path := func(errno error) error { return &fs.PathError{Op: "write", Path: "/h/config/a.yaml", Err: errno} }
	cases := []struct {
		err  error
		want string
	}{
		{path(syscall.ENOSPC), "the disk holding /h is full: free some space, then retry"},
		{path(syscall.EDQUOT), "the disk holding /h is full: free some space, then retry"},
		{path(syscall.EROFS), "the file system holding /h is read-only: remount it read-write, then retry"},
		{path(syscall.EACCES), "permission denied: run the server as the owner of /h, or give that user back the file named here"},
		{path(syscall.EPERM), "permission denied: run the server as the owner of /h, or give that user back the file named here"},
		{path(syscall.EIO), "I/O error: the disk may be failing: check the kernel log (dmesg), copy /h somewhere safe, then run `mcpkeep doctor --home /h`"},
		{fmt.Errorf("commit: %w", &failpoint.InjectedError{Name: "gitstore.before-ref"}), "I/O error: the disk may be failing: check the kernel log (dmesg), copy /h somewhere safe, then run `mcpkeep doctor --home /h`"},
		{errors.Join(errors.New("write failed"), path(syscall.ENOSPC)), "the disk holding /h is full: free some space, then retry"},
		{path(syscall.ENOENT), ""},
		{errors.New("bad argument"), ""},
	}
	env := &Env{Home: "/h"}
	for _, tc := range cases {
		assert.Equal(t, tc.want, remedy(tc.err, "/h"), "%v", tc.err)
		explained := env.Explain(tc.err)
		assert.ErrorIs(t, explained, tc.err, "the cause stays matchable")
		if tc.want == "" {
			assert.Equal(t, tc.err, explained)
		} else {
			assert.Equal(t, tc.want+": "+tc.err.Error(), explained.Error())
			twice := withRemedy(fmt.Errorf("shutdown: %w", explained), "/h")
			assert.Equal(t, "shutdown: "+explained.Error(), twice.Error(), "the remedy is given once")
		}
	}
	assert.NoError(t, env.Explain(nil))
}

// TestExplainCorruptConfig: a config file that does not parse is restored
// from git by a start or by doctor --fix, if it is a file they parse, and
// Explain says so, with when doctor --fix runs; a corrupt file elsewhere
// keeps atomicfile's generic advice, and a remedy already given is kept.
func TestExplainCorruptConfig(t *testing.T) {
	env := &Env{Home: "/h", ConfigDir: "/h/config"}
	corrupt := func(path, remedy string) error {
		return &atomicfile.CorruptError{Path: path, Line: 2, Err: errors.New("bad"), Remedy: remedy}
	}
	for _, tc := range []struct {
		err  error
		says string
	}{
		{corrupt("/h/config/personas/default.yaml", ""), "(fix the file by hand; or, if it is not valid YAML or JSON, " +
			"let the server's next start, or `mcpkeep doctor --fix --home /h` once no server or other program holds the home, " +
			"move it to backups/ and put back its last good version from git, if it has one)"},
		{corrupt("/h/config/notes.txt", ""), "(fix the file by hand)"}, // recovery parses no *.txt
		{corrupt("/h/notes.yaml", ""), "(fix the file by hand or restore it from a backup)"},
		{corrupt("/h/config", ""), "(fix the file by hand or restore it from a backup)"},
		{corrupt("/h/config/a.yaml", "ask the caller"), "(ask the caller)"},
	} {
		err := env.Explain(tc.err)
		assert.ErrorIs(t, err, atomicfile.ErrCorrupt)
		assert.True(t, strings.HasSuffix(err.Error(), tc.says), "%v", err)
	}
}

// TestExplainRefusedConfig: what a read refused in ConfigDir is moved
// aside and restored from git by a start, and by doctor --fix, which
// reads with the server's recorded limit, smaller than the default too; a
// directory recovery leaves alone gets neither.
func TestExplainRefusedConfig(t *testing.T) {
	const (
		start  = "let the server's next start"
		doctor = "`mcpkeep doctor --fix --home /h` once no server or other program holds the home"
	)
	for _, tc := range []struct {
		name    string
		max     int64
		err     *atomicfile.RefusedError
		fixedBy []string
	}{
		{"link", 0, &atomicfile.RefusedError{Path: "/h/config/a.yaml", Mode: fs.ModeSymlink}, []string{start, doctor}},
		{"fifo", 0, &atomicfile.RefusedError{Path: "/h/config/a.txt", Mode: fs.ModeNamedPipe}, []string{start, doctor}},
		{"too large", 0, &atomicfile.RefusedError{Path: "/h/config/a.yaml", Size: 2 << 20, Limit: 1 << 20}, []string{start, doctor}},
		{"too large for a larger limit", 4 << 20, &atomicfile.RefusedError{Path: "/h/config/a.yaml", Size: 5 << 20, Limit: 4 << 20}, []string{start, doctor}},
		{"too large for a smaller limit", 64 << 10, &atomicfile.RefusedError{Path: "/h/config/a.yaml", Size: 100 << 10, Limit: 64 << 10}, []string{start, doctor}},
		{"directory named like a config file", 0, &atomicfile.RefusedError{Path: "/h/config/a.yaml", Mode: fs.ModeDir}, []string{start, doctor}},
		{"other directory", 0, &atomicfile.RefusedError{Path: "/h/config/a.txt", Mode: fs.ModeDir}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &Env{Home: "/h", ConfigDir: "/h/config", MaxFileSize: tc.max}
			err := env.Explain(tc.err)
			var re *atomicfile.RefusedError
			require.ErrorAs(t, err, &re)
			assert.Contains(t, err.Error(), "put one in its place")
			for _, by := range []string{start, doctor} {
				assert.Equal(t, slices.Contains(tc.fixedBy, by), strings.Contains(err.Error(), by), "%q in %v", by, err)
			}
		})
	}
}
