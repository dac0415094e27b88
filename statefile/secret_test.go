package statefile_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestHelperStateWriter is a child of TestStateFileNeverReadableByOthers:
// with umask 022 it writes a state file holding a token to
// STATEFILE_PATH, and is killed by the failpoint armed.
func TestHelperStateWriter(t *testing.T) {
	if os.Getenv("STATEFILE_HELPER") != "write" {
		return
	}
	syscall.Umask(0o022)
	s := newState(t, "helios", "/h")
	s.Token = "6f1c0d7e2b9a4c3f8e5d1a0b7c6e9f2a"
	err := statefile.Write(os.Getenv("STATEFILE_PATH"), &s)
	fmt.Println("survived", err) // not reached when the failpoint kills
	os.Exit(1)
}

// TestStateFileNeverReadableByOthers: the state file holds the bearer
// token, so it is 0600 from the moment its temporary file exists, with the
// usual umask of 022: a server killed before the rename leaves an orphan
// no other user can read. A seed project wrote its token file, then
// chmod'ed it 0600.
func TestStateFileNeverReadableByOthers(t *testing.T) {
	for _, point := range []string{"atomicfile.before-fsync", "atomicfile.before-rename"} {
		for _, existing := range []os.FileMode{0, 0o644} {
			t.Run(fmt.Sprintf("%s/existing %#o", point, existing), func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, statefile.FileName)
				if existing != 0 {
					require.NoError(t, os.WriteFile(path, []byte("{}"), existing))
					require.NoError(t, os.Chmod(path, existing))
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStateWriter$")
				cmd.Env = append(os.Environ(), "STATEFILE_HELPER=write", "STATEFILE_PATH="+path,
					failpoint.EnvVar+"="+point+"=kill")
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				ws := ee.Sys().(syscall.WaitStatus)
				require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child died at %s: %s", point, out)

				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				var temps []string
				for _, e := range entries {
					if atomicfile.IsTemp(e.Name()) {
						temps = append(temps, e.Name())
						fi, err := e.Info()
						require.NoError(t, err)
						assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the orphan %s holds the token", e.Name())
					}
				}
				assert.Len(t, temps, 1, "the killed write's temporary file")
			})
		}
	}
}
