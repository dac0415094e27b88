package crashsuite_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// needRoot skips a test that mounts file systems unless it runs as root on
// Linux, saying what it needs.
func needRoot(t *testing.T, what string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("%s needs Linux (it mounts file systems)", what)
	}
	if os.Geteuid() != 0 {
		t.Skipf("%s needs root to mount file systems; run the tests as root to include it", what)
	}
}

// unmountAtEnd unmounts dir when the test ends, lazily if it is busy.
func unmountAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v (detaching it lazily)", dir, err)
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
}

// mountTmpfs mounts a tmpfs of the given size (e.g. "1m") on a new
// directory and unmounts it when the test ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	unmountAtEnd(t, dir)
	return dir
}

// bindReadOnly makes dir read-only in place with a read-only bind mount
// over it, and returns a function that makes it writable again. The bind
// mount is removed when the test ends.
func bindReadOnly(t *testing.T, dir string) (writable func()) {
	t.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount %s: %v", dir, err)
	}
	unmountAtEnd(t, dir)
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount %s read-only: %v", dir, err)
	}
	return func() {
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND, ""); err != nil {
			t.Fatalf("remount %s read-write: %v", dir, err)
		}
	}
}
