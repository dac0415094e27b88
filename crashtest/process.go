package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// ErrKilled is matched, with errors.Is, by the *ExitError of a process that
// died by SIGKILL: a failpoint's kill action, Kill, or its context ending.
var ErrKilled = errors.New("crashtest: process killed by SIGKILL")

// ExitError reports a process that did not exit with status 0.
type ExitError struct {
	Path   string         // the binary
	Code   int            // exit status, or -1 when a signal ended the process
	Signal syscall.Signal // the signal that ended the process, or 0
	Stderr string         // the last bytes the process wrote to standard error
}

// Error says how the process ended and quotes the end of its stderr.
func (e *ExitError) Error() string {
	var b strings.Builder
	b.WriteString("crashtest: ")
	b.WriteString(filepath.Base(e.Path))
	if e.Signal != 0 {
		fmt.Fprintf(&b, " died by signal %d (%v)", int(e.Signal), e.Signal)
	} else {
		fmt.Fprintf(&b, " exited with status %d", e.Code)
	}
	if s := lastBytes(e.Stderr, 1024); s != "" {
		b.WriteString("; stderr ends:\n")
		b.WriteString(s)
	}
	return b.String()
}

// Unwrap returns ErrKilled for a process that died by SIGKILL, else nil.
func (e *ExitError) Unwrap() error {
	if e.Signal == syscall.SIGKILL {
		return ErrKilled
	}
	return nil
}

// Cmd describes a process for Start. Only Path is required.
type Cmd struct {
	Path string   // the binary, for example from Build
	Args []string // arguments, without the program name
	Dir  string   // working directory; "" is the current one

	// Env holds "KEY=value" entries added to the current process's
	// environment; where a key repeats, the last entry wins.
	Env []string

	// Failpoints is the value of MCPKEEP_FAILPOINTS the process starts
	// with: name=action items separated by ";", such as
	// "atomicfile.before-rename=kill;gitstore.before-ref=error@2". The
	// actions are kill (the process SIGKILLs itself), error (the point
	// fails with an injected I/O error, which unwraps to syscall.EIO) and
	// sleep(D) (it waits for the duration D, such as sleep(50ms)); @N acts
	// on the Nth hit only, else every hit acts. "" arms nothing, even when
	// the current process's environment arms something. Start rejects an
	// unknown point or action. The names are Failpoints'.
	Failpoints string

	// Stdin, if non-nil, is the process's standard input. If nil,
	// Process.Stdin returns a pipe to it.
	Stdin io.Reader

	// Stdout, if non-nil, receives the process's standard output. If nil,
	// Process.Stdout returns a pipe from it, which the caller must read (or
	// the process blocks once the pipe's buffer is full).
	Stdout io.Writer

	// Stderr, if non-nil, also receives the process's standard error. The
	// last few kilobytes are kept for Process.Stderr either way.
	Stderr io.Writer
}

// Process is a started binary. Every Process must be waited for with Wait,
// which releases its pipes; its methods are safe for concurrent use.
type Process struct {
	path     string
	cmd      *exec.Cmd
	stdin    *os.File // the parent's end, nil when Cmd.Stdin was set
	stdout   *os.File // the parent's end, nil when Cmd.Stdout was set
	stderr   tail
	done     chan struct{}
	err      error // valid once done is closed
	sentKill atomic.Bool
	release  sync.Once
	armed    map[string]failpoint.Action // Cmd.Failpoints
}

// Start starts the process c describes, with the failpoints c.Failpoints
// armed. The process is SIGKILLed when ctx is done, so ctx bounds its life
// and that of Wait. Started with a context Run passed to a Plan's function
// (or one derived from it), the process is the iteration's: a failpoint
// armed in it that kills it counts as fired, and Run kills it, if it still
// runs, when the iteration ends.
func Start(ctx context.Context, c Cmd) (*Process, error) {
	if c.Path == "" {
		return nil, errors.New("crashtest: Start needs Cmd.Path: build the binary with Build or give its path")
	}
	armed, err := failpoint.Parse(c.Failpoints)
	if err != nil {
		return nil, fmt.Errorf("crashtest: Cmd.Failpoints %q: %w", c.Failpoints, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), c.Env...), failpoint.EnvVar+"="+c.Failpoints)
	cmd.WaitDelay = time.Second // a grandchild holding stderr open must not hang Wait
	p := &Process{path: c.Path, cmd: cmd, done: make(chan struct{}), armed: armed}

	var childEnds []*os.File
	closeAll := func() {
		for _, f := range append(childEnds, p.stdin, p.stdout) {
			if f != nil {
				f.Close()
			}
		}
	}
	if c.Stdin != nil {
		cmd.Stdin = c.Stdin
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd.Stdin, p.stdin = r, w
		childEnds = append(childEnds, r)
	}
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, err
		}
		// An *os.File goes to the child as is: what it wrote before dying
		// stays readable from the pipe, with no copying goroutine to lose it.
		cmd.Stdout, p.stdout = w, r
		childEnds = append(childEnds, w)
	}
	cmd.Stderr = &p.stderr
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&p.stderr, c.Stderr)
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("crashtest: start %s: %w", c.Path, err)
	}
	for _, f := range childEnds {
		f.Close()
	}
	stop := context.AfterFunc(ctx, func() { p.signal() })
	go func() {
		p.err = p.reap()
		stop()
		close(p.done)
	}()
	record(ctx, p)
	return p, nil
}

func (p *Process) reap() error {
	err := p.cmd.Wait()
	st := p.cmd.ProcessState
	if st == nil {
		return err
	}
	if !st.Success() {
		e := &ExitError{Path: p.path, Code: st.ExitCode(), Stderr: p.stderr.String()}
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		}
		return e
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil // it exited 0; something it started still holds stderr
	}
	return err
}

// Pid returns the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdin returns the write end of a pipe to the process's standard input,
// or nil when Cmd.Stdin was set. Closing it sends end-of-file. Writing after
// the process died returns an error (EPIPE).
func (p *Process) Stdin() io.WriteCloser {
	if p.stdin == nil {
		return nil
	}
	return p.stdin
}

// Stdout returns the read end of a pipe from the process's standard output,
// or nil when Cmd.Stdout was set. Everything the process wrote before it
// died can still be read; then reads return io.EOF. Read what you need
// before calling Wait, which closes the pipe.
func (p *Process) Stdout() io.ReadCloser {
	if p.stdout == nil {
		return nil
	}
	return p.stdout
}

// Stderr returns the last few kilobytes the process wrote to standard
// error so far, for failure messages.
func (p *Process) Stderr() string { return p.stderr.String() }

// Done returns a channel that is closed once the process has exited and
// been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL to the process, unless it has already exited, and
// waits until it has been reaped. It does not close the pipes, so what the
// process wrote before dying can still be read from Stdout.
func (p *Process) Kill() error {
	if err := p.signal(); err != nil {
		return err
	}
	<-p.done
	return nil
}

func (p *Process) signal() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if !exiting(p.cmd.Process.Pid) {
		p.sentKill.Store(true)
	}
	err := p.cmd.Process.Signal(syscall.SIGKILL)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("crashtest: kill %s (pid %d): %w", filepath.Base(p.path), p.Pid(), err)
	}
	return nil
}

// Wait waits for the process to exit, then closes the pipes of Stdin and
// Stdout. It returns nil when the process exited with status 0 and an
// *ExitError otherwise; errors.Is(err, ErrKilled) reports a death by
// SIGKILL. Wait may be called more than once and returns the same result.
func (p *Process) Wait() error {
	<-p.done
	p.release.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		}
		if p.stdout != nil {
			p.stdout.Close()
		}
	})
	return p.err
}

// Exited reports whether the process has exited and been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Killed reports whether the process has died by SIGKILL, whoever sent it:
// an armed failpoint, Kill, or the end of Start's context.
func (p *Process) Killed() bool {
	if !p.Exited() {
		return false
	}
	var e *ExitError
	return errors.As(p.err, &e) && e.Signal == syscall.SIGKILL
}

// ExitCode returns the process's exit status, or -1 while it runs or when
// a signal ended it.
func (p *Process) ExitCode() int {
	if !p.Exited() || p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// exiting reports whether pid, a child not yet reaped, is already dying or
// dead. A failpoint kill races with the Kill a driver sends when it sees
// end-of-file on stdout; this keeps that kill from being counted as ours.
// The kernel marks a task PF_EXITING before it closes its files, so a
// process whose stdout has reached end-of-file always reads as exiting.
func exiting(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		_, perr := os.Stat("/proc/self/stat")
		return perr == nil // gone; or no /proc (macOS): assume alive
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false
	}
	// After the command name: state ppid pgrp session tty_nr tpgid flags.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h).
const pfExiting = 0x00000004

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 8 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 2*tailSize {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailSize:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastBytes(string(t.buf), tailSize)
}

// lastBytes returns about the last n bytes of s, starting at a line.
func lastBytes(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return s
}
