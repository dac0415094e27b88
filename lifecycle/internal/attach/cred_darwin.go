package attach

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// maxPathLen is the longest socket path: sun_path is 104 bytes, NUL included.
const maxPathLen = 103

// PeerCred returns the user (LOCAL_PEERCRED, what getpeereid reads) and
// the process (LOCAL_PEERPID) at the other end of c.
func PeerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("attach: peer credentials: %w", err)
	}
	var cred *unix.Xucred
	var pid int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if serr == nil {
			pid, _ = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		}
	}); err != nil {
		return Cred{}, fmt.Errorf("attach: peer credentials: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("attach: peer credentials (LOCAL_PEERCRED): %w", serr)
	}
	return Cred{UID: int(cred.Uid), PID: pid}, nil
}
