package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

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
// from git by a restart or by doctor --fix, and Explain says so; a corrupt
// file elsewhere keeps atomicfile's generic advice, and a remedy already
// given is kept.
func TestExplainCorruptConfig(t *testing.T) {
	env := &Env{Home: "/h", ConfigDir: "/h/config"}
	corrupt := func(path, remedy string) error {
		return &atomicfile.CorruptError{Path: path, Line: 2, Err: errors.New("bad"), Remedy: remedy}
	}
	for _, tc := range []struct {
		err  error
		says string
	}{
		{corrupt("/h/config/personas/default.yaml", ""), "(restart the server, or stop it and run `mcpkeep doctor --fix --home /h`: " +
			"either moves the file to backups/ and puts back its last good version from git; or fix it by hand)"},
		{corrupt("/h/notes.yaml", ""), "(fix the file by hand or restore it from a backup)"},
		{corrupt("/h/config", ""), "(fix the file by hand or restore it from a backup)"},
		{corrupt("/h/config/a.yaml", "ask the caller"), "(ask the caller)"},
	} {
		err := env.Explain(tc.err)
		assert.ErrorIs(t, err, atomicfile.ErrCorrupt)
		assert.True(t, strings.HasSuffix(err.Error(), tc.says), "%v", err)
	}
}
