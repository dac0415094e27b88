//go:build linux

package crashsuite_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

// EXT4_IOC_SHUTDOWN and EXT4_GOING_FLAGS_NOLOGFLUSH (linux/ext4.h): shut the
// file system down at once, without flushing the journal, as a power cut
// would. Whatever was not yet on the disk is lost.
const (
	ext4IocShutdown          = 0x8004587d
	ext4GoingFlagsNoLogFlush = 2
)

// loopDisk is an ext4 file system in an image file, mounted on a loop
// device, that a test can cut the power of.
type loopDisk struct {
	img, mnt string
	mounted  bool
}

// newLoopDisk makes a 64 MiB ext4 image and mounts it. It skips the test
// where the machine has no mkfs.ext4 or no loop devices. When the test
// ends the image is unmounted and its loop devices detached, whatever
// happened.
func newLoopDisk(t *testing.T) *loopDisk {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skipf("the power-cut test needs mkfs.ext4: %v", err)
	}
	dir := t.TempDir()
	d := &loopDisk{img: filepath.Join(dir, "disk.img"), mnt: filepath.Join(dir, "mnt")}
	require.NoError(t, os.Mkdir(d.mnt, 0o755))
	f, err := os.Create(d.img)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(64<<20))
	require.NoError(t, f.Close())
	if out, err := exec.Command(mkfs, "-q", "-F", d.img).CombinedOutput(); err != nil {
		t.Skipf("the power-cut test cannot make an ext4 image: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if d.mounted {
			if err := unix.Unmount(d.mnt, 0); err != nil {
				t.Errorf("unmount %s: %v (detaching it lazily)", d.mnt, err)
				unix.Unmount(d.mnt, unix.MNT_DETACH)
			}
		}
		// mount -o loop sets autoclear; detach whatever is still attached.
		out, _ := exec.Command("losetup", "-j", d.img).Output()
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			if dev, _, ok := strings.Cut(line, ":"); ok {
				if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
					t.Errorf("losetup -d %s: %v: %s", dev, err, out)
				}
			}
		}
	})
	if err := d.mount(); err != nil {
		t.Skipf("the power-cut test cannot loop-mount an image (no loop devices?): %v", err)
	}
	if err := d.cut(); err != nil {
		t.Skipf("the power-cut test cannot shut ext4 down: %v", err)
	}
	require.NoError(t, d.unmount())
	require.NoError(t, d.mount())
	return d
}

// mount mounts the image, replaying its journal.
func (d *loopDisk) mount() error {
	if out, err := exec.Command("mount", "-o", "loop", "-t", "ext4", d.img, d.mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("mount -o loop %s: %v: %s", d.img, err, bytes.TrimSpace(out))
	}
	d.mounted = true
	return nil
}

// unmount unmounts the image.
func (d *loopDisk) unmount() error {
	if err := unix.Unmount(d.mnt, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", d.mnt, err)
	}
	d.mounted = false
	return nil
}

// cut cuts the power: the file system stops at once and loses what was
// not written to the disk.
func (d *loopDisk) cut() error {
	fd, err := unix.Open(d.mnt, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetPointerInt(fd, ext4IocShutdown, ext4GoingFlagsNoLogFlush); err != nil {
		return fmt.Errorf("ioctl EXT4_IOC_SHUTDOWN on %s: %w", d.mnt, err)
	}
	return nil
}
