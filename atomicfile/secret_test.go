package atomicfile_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

const (
	secretDirEnv   = "ATOMICFILE_SECRET_DIR"   // where the child writes
	secretCallEnv  = "ATOMICFILE_SECRET_CALL"  // "WriteFile" or "WriteFiles"
	secretPermEnv  = "ATOMICFILE_SECRET_PERM"  // the perm it passes, octal
	secretUmaskEnv = "ATOMICFILE_SECRET_UMASK" // its umask, octal
)

var secret = []byte("token: 6f1c0d7e2b9a4c3f8e5d1a0b7c6e9f2a\n")

// secretFiles are the files a secret writer replaces: the token alone for
// WriteFile, the token and a second secret for WriteFiles.
func secretFiles(dir, call string) []string {
	paths := []string{filepath.Join(dir, "token")}
	if call == "WriteFiles" {
		paths = append(paths, filepath.Join(dir, "key"))
	}
	return paths
}

// TestHelperSecretWriter is a child of TestSecretNeverReadableByOthers:
// with the umask and perm its environment gives, it writes the secret
// files by the call it names, and is killed by the failpoint armed.
func TestHelperSecretWriter(t *testing.T) {
	dir := os.Getenv(secretDirEnv)
	if dir == "" {
		return
	}
	umask, err := strconv.ParseUint(os.Getenv(secretUmaskEnv), 8, 32)
	require.NoError(t, err)
	perm, err := strconv.ParseUint(os.Getenv(secretPermEnv), 8, 32)
	require.NoError(t, err)
	syscall.Umask(int(umask))
	call := os.Getenv(secretCallEnv)
	var files []atomicfile.File
	for _, p := range secretFiles(dir, call) {
		files = append(files, atomicfile.File{Path: p, Data: secret, Perm: os.FileMode(perm)})
	}
	if call == "WriteFile" {
		err = atomicfile.WriteFile(files[0].Path, files[0].Data, files[0].Perm)
	} else {
		err = atomicfile.WriteFiles(files...)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestSecretNeverReadableByOthers: a file written with perm 0600, or with
// perm 0 when it is new (DefaultPerm), is 0600 from the moment its
// temporary file exists, whatever the umask: a writer killed before its
// rename leaves a temporary file no other user can read. A seed project
// wrote its token file, then chmod'ed it 0600, leaving a window in which
// the token was world-readable, and forever if it died in between.
func TestSecretNeverReadableByOthers(t *testing.T) {
	type setup struct {
		name     string
		perm     os.FileMode
		umask    int
		existing os.FileMode // the mode of a file already there, 0 for none
	}
	setups := []setup{
		{name: "perm 0600, umask 022", perm: 0o600, umask: 0o022},
		{name: "perm 0600 over a 0644 file, umask 022", perm: 0o600, umask: 0o022, existing: 0o644},
		{name: "perm 0600, umask 0", perm: 0o600, umask: 0},
		{name: "perm 0 on a new file, umask 022", perm: 0, umask: 0o022},
		{name: "perm 0 on a new file, umask 0", perm: 0, umask: 0},
		{name: "perm 0 on a new file, umask 077", perm: 0, umask: 0o077},
		{name: "perm 0 on a new file, umask 277", perm: 0, umask: 0o277},
	}
	for _, call := range []string{"WriteFile", "WriteFiles"} {
		for _, s := range setups {
			for _, point := range []string{"atomicfile.before-fsync", "atomicfile.before-rename"} {
				t.Run(fmt.Sprintf("%s/%s/%s", call, s.name, point), func(t *testing.T) {
					dir := t.TempDir()
					paths := secretFiles(dir, call)
					if s.existing != 0 {
						for _, p := range paths {
							require.NoError(t, os.WriteFile(p, []byte("old\n"), s.existing))
							require.NoError(t, os.Chmod(p, s.existing))
						}
					}
					cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSecretWriter$")
					cmd.Env = append(os.Environ(), secretDirEnv+"="+dir, secretCallEnv+"="+call,
						secretPermEnv+"="+strconv.FormatUint(uint64(s.perm), 8),
						secretUmaskEnv+"="+strconv.FormatUint(uint64(s.umask), 8),
						failpoint.EnvVar+"="+point+"=kill")
					out, err := cmd.CombinedOutput()
					var ee *exec.ExitError
					require.ErrorAs(t, err, &ee, "%s", out)
					ws := ee.Sys().(syscall.WaitStatus)
					require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child died at %s: %s", point, out)

					entries, err := os.ReadDir(dir)
					require.NoError(t, err)
					var temps int
					for _, e := range entries {
						if !atomicfile.IsTemp(e.Name()) {
							continue
						}
						temps++
						assert.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(dir, e.Name())),
							"the orphaned temporary file %s holds the secret", e.Name())
					}
					assert.Equal(t, len(paths), temps, "a temporary file per file, orphaned by the kill")
				})
			}
		}
	}
}
