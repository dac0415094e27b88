package lifecycle

import (
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// pollable returns r, or, when r is a pipe or a socket (what an MCP host
// gives a server as its stdin), a file on the same descriptor switched to
// non-blocking mode, so that a read waiting for the client parks on Go's
// network poller instead of holding one of the process's processors in a
// blocking read(2). With GOMAXPROCS=2, a start that writes its start-up
// files on one processor while the other waits in read(2) left the
// client's first request unanswered until the runtime took that processor
// back, up to 10 ms later. A terminal is left as it is: its mode is shared
// with the shell.
func pollable(r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return r
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return r
	}
	pollableMu.Lock()
	defer pollableMu.Unlock()
	if nb, ok := pollableFiles[f]; ok {
		return nb
	}
	fd, already := -1, false
	var serr error
	err = raw.Control(func(d uintptr) {
		fd = int(d)
		var flags int
		if flags, serr = unix.FcntlInt(d, unix.F_GETFL, 0); serr == nil {
			if already = flags&unix.O_NONBLOCK != 0; !already {
				serr = unix.SetNonblock(fd, true)
			}
		}
	})
	if err != nil || serr != nil || already {
		return r // a file os.Pipe made, say, is on the poller already
	}
	// os.NewFile sees the non-blocking mode and uses the poller. Both
	// files name the descriptor; neither is closed while the process runs.
	nb := os.NewFile(uintptr(fd), f.Name())
	pollableFiles[f] = nb
	return nb
}

// pollableFiles holds the files pollable made, by the file they were made
// from: one is made per file, and kept, since its finalizer would close
// the descriptor the two share.
var (
	pollableMu    sync.Mutex
	pollableFiles = map[*os.File]*os.File{}
)

// stdin returns Options.Stdin, or os.Stdin.
func stdin(o *Options) io.Reader {
	if o.Stdin != nil {
		return o.Stdin
	}
	return os.Stdin
}
