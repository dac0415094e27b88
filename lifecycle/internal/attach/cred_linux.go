package attach

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// maxPathLen is the longest socket path: sun_path is 108 bytes, NUL included.
const maxPathLen = 107

// PeerCred returns the user and process at the other end of c (SO_PEERCRED).
func PeerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("attach: peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, fmt.Errorf("attach: peer credentials: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("attach: peer credentials (SO_PEERCRED): %w", serr)
	}
	return Cred{UID: int(cred.Uid), PID: int(cred.Pid)}, nil
}
