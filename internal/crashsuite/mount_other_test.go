//go:build !linux

package crashsuite_test

import "testing"

// The fault and power-cut tests mount Linux file systems; elsewhere they
// skip.

func needRoot(t *testing.T, what string) {
	t.Helper()
	t.Skipf("%s needs Linux (it mounts file systems)", what)
}

func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	t.Skip("tmpfs mounts need Linux")
	return ""
}

func bindReadOnly(t *testing.T, dir string) (writable func()) {
	t.Helper()
	t.Skip("bind mounts need Linux")
	return nil
}

type loopDisk struct{ mnt string }

func newLoopDisk(t *testing.T) *loopDisk {
	t.Helper()
	t.Skip("loop-mounted ext4 needs Linux")
	return nil
}

func (d *loopDisk) mount() error   { return nil }
func (d *loopDisk) unmount() error { return nil }
func (d *loopDisk) cut() error     { return nil }
