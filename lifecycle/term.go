//go:build linux || darwin

package lifecycle

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal reports whether f is a terminal: whether it has terminal
// attributes. A character device alone is not enough: /dev/null is one.
func isTerminal(f *os.File) bool {
	conn, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var errno syscall.Errno
	err = conn.Control(func(fd uintptr) {
		var t syscall.Termios
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, ioctlGetTermios, uintptr(unsafe.Pointer(&t)))
	})
	return err == nil && errno == 0
}
