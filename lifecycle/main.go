package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Exit statuses of Main.
const (
	ExitOK      = 0 // a clean stop: the client went (stdin ended), a signal, or the context
	ExitError   = 1 // Run failed: the home, the disk, the server's own NewServer
	ExitOptions = 2 // the Options cannot be used: an *OptionsError, naming the field
	ExitInUse   = 3 // the home is in use and this process cannot attach to its writer: an error matching ErrLocked
)

// Main is a server's whole main function: it runs a Harness for opts and
// exits the process. It parses no flags and reads no environment of its
// own; a server that has flags parses them first and puts their values in
// opts.
//
// Main logs to stderr (a text log at Info, when opts.Logger is nil),
// says on stderr how the server is meant to be used when its stdin is a
// terminal, runs New and Run, writes Run's error to stderr as one line
// prefixed with opts.Name, and exits with a status a launcher can act on:
// ExitOK (0) after a clean stop, ExitError (1) when Run failed,
// ExitOptions (2) for Options that New or Run refused (*OptionsError),
// ExitInUse (3) when the home is in use and this process cannot attach to
// its writer (Options.Exclusive, Options.NoStdio, a writer of another user
// or one that takes no attached clients).
//
// stdout is the MCP transport's alone: Main gives the transport a
// duplicate of it and points file descriptor 1 and os.Stdout at stderr,
// so that a tool's stray fmt.Println, or the output of a program a tool
// runs, lands in the log rather than in the client's JSON-RPC stream
// (unless opts.Stdout is set or stdio is off).
//
// Unless opts.NoSignals is set, it stops cleanly on SIGINT, SIGTERM and
// SIGHUP (as Run does), and a closed stdout or stderr makes a write fail
// instead of killing the process with SIGPIPE, so that a client that exits
// without waiting for the server does not cut its shutdown short.
func Main(opts Options) {
	os.Exit(runMain(context.Background(), opts, os.Stderr))
}

// runMain is Main without the exit, with stderr given.
func runMain(ctx context.Context, opts Options, stderr io.Writer) int {
	if !opts.NoSignals {
		ignoreSIGPIPE()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	name := opts.Name
	if name == "" {
		name = "mcp server"
	}
	h, err := New(opts)
	if err == nil {
		if stderr == os.Stderr {
			takeStdout(&h.opts, name, stderr)
		}
		h.started = paceStartGC()
		defer h.started()
		if f, ok := stdin(&opts).(*os.File); ok && !opts.NoStdio && isTerminal(f) {
			fmt.Fprintf(stderr, "%s: this is an MCP server speaking JSON-RPC on stdin/stdout; "+
				"launch it from an MCP client, or press Ctrl-D to stop\n", name)
		}
		err = h.Run(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	return exitStatus(err)
}

// exitStatus is Main's exit status after Run returned err.
func exitStatus(err error) int {
	var oe *OptionsError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &oe):
		return ExitOptions
	case errors.Is(err, ErrLocked):
		return ExitInUse
	}
	return ExitError
}

// stopSignals returns the signals that stop Run: SIGINT, SIGTERM, and
// SIGHUP (a closed terminal, or a launcher passing its own SIGHUP on),
// unless the process was started with SIGHUP ignored, as nohup does.
func stopSignals() []os.Signal {
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

var sigpipeOnce sync.Once

// ignoreSIGPIPE makes a write to a closed stdout or stderr fail with EPIPE
// for the rest of the process's life, instead of killing it: a client that
// stops reading the server's stderr must not have the next log line kill
// it in the middle of its shutdown. It asks for the signal rather than
// ignoring it (signal.Ignore), so that the processes the server starts do
// not inherit an ignored SIGPIPE; the signals are dropped unread.
func ignoreSIGPIPE() {
	sigpipeOnce.Do(func() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) })
}
