//go:build unix

package attach

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// SocketName is the socket's name in a home whose path leaves room for it.
const SocketName = "mcp.sock"

// RuntimeDirEnv names the directory of sockets whose home path is too long
// for a socket address; the temp directory when it is unset.
const RuntimeDirEnv = "XDG_RUNTIME_DIR"

// Path returns the socket of home: <home>/mcp.sock when that path, and the
// temporary name it is bound under, fit in a socket address (sun_path:
// 108 bytes on Linux, 104 on macOS, the last one a NUL), else a short name
// derived from home in a directory of this user's, mcpkeep-<uid>, under
// $XDG_RUNTIME_DIR or the temp directory. That directory is shared by
// every such home of the user and is never removed (see Unlisten). The
// writer names the path it bound in its state file, since the environment
// of two processes may differ; Path is what both compute without one.
func Path(home string) string {
	p := filepath.Join(home, SocketName)
	if fits(p) {
		return p
	}
	return filepath.Join(shortDir(), shortName(home))
}

// IsSocketName reports whether name, an entry of a home's top directory,
// is the socket or a temporary name it is bound under.
func IsSocketName(name string) bool {
	return name == SocketName || isTempName(SocketName, name)
}

// isTempName reports whether name is one of the temporary names Listen
// binds a socket named base under: ".<base>.<random hex>"
// (.mcp.sock.0a1b2c3d), or anything else after the second dot.
func isTempName(base, name string) bool {
	return strings.HasPrefix(name, "."+base+".")
}

// Temps returns the entries beside path that carry a temporary name
// Listen binds path under, whatever they are, in name order: a writer
// killed between binding and renaming leaves one. It reads the directory
// rather than globbing, since path may hold a pattern's metacharacters (a
// home's path with a [); a directory it cannot read has none to return.
func Temps(path string) []string {
	dir, base := filepath.Dir(path), filepath.Base(path)
	entries, _ := os.ReadDir(dir) // sorted by name
	var temps []string
	for _, e := range entries {
		if isTempName(base, e.Name()) {
			temps = append(temps, filepath.Join(dir, e.Name()))
		}
	}
	return temps
}

// fits reports whether path, and the longest temporary name Listen binds
// beside it, fit in a socket address.
func fits(path string) bool {
	return len(tempPath(path, strings.Repeat("0", 2*tempRandBytes))) <= maxPathLen
}

const tempRandBytes = 4

func tempPath(path, suffix string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+suffix)
}

func shortDir() string {
	dir := os.Getenv(RuntimeDirEnv)
	if dir == "" || !filepath.IsAbs(dir) {
		dir = os.TempDir()
	}
	return filepath.Join(dir, fmt.Sprintf("mcpkeep-%d", os.Getuid()))
}

func shortName(home string) string {
	sum := sha256.Sum256([]byte(home))
	return hex.EncodeToString(sum[:8]) + ".sock"
}

// Listen binds the socket at path for a writer that holds its home's lock,
// so that whatever is at path is stale: a socket of a writer that died,
// which is replaced, never dialled. It binds a temporary name beside path,
// makes it 0600, and renames it over path only once it listens, so a
// process that dials path reaches a listening socket or none. The
// directory of a path outside the home is created 0700, and refused unless
// this user owns it and no one else may enter it. Close the listener with
// Unlisten, which removes path.
func Listen(path string) (*net.UnixListener, error) {
	if !fits(path) {
		return nil, fmt.Errorf("attach: socket path %s is too long for a socket address (%d bytes at most, with its temporary name)", path, maxPathLen)
	}
	dir := filepath.Dir(path)
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	removeTemps(path)
	var b [tempRandBytes]byte
	_, _ = rand.Read(b[:])
	tmp := tempPath(path, hex.EncodeToString(b[:]))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("attach: bind the socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // it is renamed; Unlisten removes the path it has then
	fail := func(err error) (*net.UnixListener, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(fmt.Errorf("attach: %w", err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("attach: put the socket in place: %w", err))
	}
	return ln, nil
}

// Unlisten closes ln and removes path, the socket Listen bound there, if
// it is still ln's: the caller holds the home's lock, so no other writer
// has bound path since. It leaves the socket's directory, as tmux leaves
// /tmp/tmux-<uid>. Outside the home, that directory is shared by every
// home of the user whose path is too long: removing it once empty would
// race with another home's writer between Listen's mkdir and its bind,
// and would free its fixed name in the temp directory for another user to
// make first, after which Listen refuses it and no process can attach.
// What stays is one empty 0700 directory, emptied with $XDG_RUNTIME_DIR
// at logout, or with the temp directory.
func Unlisten(ln *net.UnixListener, path string) error {
	err := ln.Close()
	if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// IsStale reports whether path is a socket nothing listens on: a
// connection to it is refused. Anything that is not a socket, a socket
// that accepts a connection, or one that cannot tell now (its backlog is
// full), is not stale.
func IsStale(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return false
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// removeTemps removes the temporary sockets (Temps) a writer killed
// between bind and rename left beside path, for Listen, whose caller
// holds the home's lock: no other writer binds beside path meanwhile.
func removeTemps(path string) {
	for _, t := range Temps(path) {
		os.Remove(t)
	}
}

// privateDir makes sure dir exists, belongs to this user and no one else
// may write in it, so no one else can put a socket where ours is dialled:
// a home is 0700 when lifecycle makes it, and a directory under the temp
// directory is made 0700 here. (Dialling needs write permission on the
// 0600 socket, and each end checks the other's uid besides.)
func privateDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("attach: socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("attach: socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("attach: socket directory %s is not a directory; remove it", dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("attach: socket directory %s belongs to uid %d, not to this user (uid %d); remove it or set %s",
			dir, st.Uid, os.Getuid(), RuntimeDirEnv)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("attach: other users may write in the socket directory %s (mode %v); make it 0700 (chmod 700 %s)",
			dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// ErrNoWriter: nothing listens at the socket (it is missing, or stale).
var ErrNoWriter = errors.New("attach: no writer listens at the socket")

// dial connects to the writer's socket at path and checks that the writer
// runs as this user. A missing or stale socket gives an error matching
// ErrNoWriter.
func dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %w", ErrNoWriter, err)
		}
		return nil, fmt.Errorf("attach: dial %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	cred, err := PeerCred(uc)
	if err != nil {
		uc.Close()
		return nil, err
	}
	if cred.UID != os.Getuid() {
		uc.Close()
		return nil, fmt.Errorf("attach: the process listening at %s (pid %d) runs as uid %d, not as this user (uid %d); not attaching",
			path, cred.PID, cred.UID, os.Getuid())
	}
	return uc, nil
}

// Cred is the user and process at the other end of a unix socket.
type Cred struct {
	UID int // the user
	PID int // the process; 0 where the system does not tell
}
