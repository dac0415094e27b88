package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

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
