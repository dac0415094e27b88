//go:build unix && !linux && !darwin

package attach

import (
	"errors"
	"net"
)

// maxPathLen is the longest socket path on BSDs: sun_path is 104 bytes.
const maxPathLen = 103

// PeerCred is not implemented here: only Linux and macOS are supported, and
// a writer that cannot check its peer refuses it.
func PeerCred(c *net.UnixConn) (Cred, error) {
	return Cred{}, errors.New("attach: peer credentials are read on Linux and macOS only")
}
