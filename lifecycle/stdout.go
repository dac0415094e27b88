package lifecycle

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// takeStdout keeps the process's stdout for the MCP transport alone, for
// Main: the transport gets a duplicate of it, and file descriptor 1 and
// os.Stdout then point at stderr, so that a stray fmt.Println in a tool,
// or the output of a program a tool runs, goes to the log instead of
// into the JSON-RPC stream, where the client would read a line that is not
// a message. It does nothing when opts sets Stdout or turns stdio off, and
// leaves stdout as it is if a system call fails (it says so on stderr).
func takeStdout(opts *Options, name string, stderr io.Writer) {
	if opts.Stdout != nil || opts.NoStdio {
		return
	}
	fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err == nil {
		if err = unix.Dup2(2, 1); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: stdout stays shared with the MCP transport (%v): a tool that prints to stdout corrupts the client's stream\n", name, err)
		return
	}
	opts.Stdout = os.NewFile(uintptr(fd), "/dev/stdout")
	os.Stdout = os.Stderr
}
