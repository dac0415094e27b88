package crashtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// Crash a program that appends each line of its input to a file and
// acknowledges it on stdout: at each of four failpoints in turn, then four
// times at random. After every crash, restart it so it repairs the file,
// and check that every acknowledged line survived. In a test, pass t as the
// Logger and t.Context() as the context, and assert that
// summary.Violations is empty.
func ExampleRun() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "crashtest-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bin, err := crashtest.Build(ctx, "./internal/testprog", dir) // your server: "./cmd/myserver"
	if err != nil {
		fmt.Println(err)
		return
	}
	file := filepath.Join(dir, "lines")
	var acked []string // every line the program acknowledged, over all iterations

	plan := crashtest.Plan{
		Iterations: 8,
		Failpoints: []string{"atomicfile.before-write", "atomicfile.before-fsync", "atomicfile.before-rename", "atomicfile.before-dir-fsync"},
		Seed:       1, // 0 reads MCPKEEP_CRASH_SEED or picks a new seed
		MaxDelay:   20 * time.Millisecond,
		Start: func(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
			return crashtest.Start(ctx, crashtest.Cmd{Path: bin, Args: []string{"-file", file}, Failpoints: it.Failpoints})
		},
		Drive: func(ctx context.Context, it *crashtest.Iteration, p *crashtest.Process) error {
			out := bufio.NewScanner(p.Stdout())
			for i := 0; ; i++ { // until the kill
				line := fmt.Sprintf("%d.%d", it.N, i)
				if _, err := fmt.Fprintln(p.Stdin(), line); err != nil || !out.Scan() {
					return nil // it died: expected
				}
				acked = append(acked, line)
			}
		},
		Restart: func(ctx context.Context, it *crashtest.Iteration) error {
			p, err := crashtest.Start(ctx, crashtest.Cmd{Path: bin, Args: []string{"-file", file}, Stdin: strings.NewReader("")})
			if err != nil {
				return err
			}
			return p.Wait()
		},
		Check: func(ctx context.Context, it *crashtest.Iteration) error {
			data, err := os.ReadFile(file)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			lines := strings.Split(string(data), "\n")
			var lost []error
			for _, a := range acked {
				if !slices.Contains(lines, a) {
					lost = append(lost, fmt.Errorf("acknowledged line %q is not in %s", a, file))
				}
			}
			return errors.Join(lost...)
		},
	}
	summary, err := crashtest.Run(ctx, nil, plan)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(summary)
	// Output:
	// crash suite: 8 crashes, 4 failpoints, 0 violations, seed 1
}

// A Schedule built from a printed seed makes the same choices again.
func ExampleSchedule() {
	s := crashtest.NewSchedule(42)
	fmt.Println(s.Seed())
	fmt.Println(s.Delay(10*time.Millisecond, 50*time.Millisecond))
	fmt.Println(s.Intn(100))
	fmt.Println(s.Pick([]string{"gitstore.before-ref", "atomicfile.before-rename", "lifecycle.after-state-write"}))
	// Output:
	// 42
	// 33.258995ms
	// 24
	// lifecycle.after-state-write
}

// Start a binary with a failpoint armed to kill it, and tell the kill from
// a clean exit.
func ExampleStart() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "crashtest-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bin, err := crashtest.Build(ctx, "./internal/testprog", dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := crashtest.Start(ctx, crashtest.Cmd{
		Path:       bin,
		Args:       []string{"-file", filepath.Join(dir, "lines")},
		Failpoints: "atomicfile.before-rename=kill",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Fprintln(p.Stdin(), "hello") // the write dies before its rename
	err = p.Wait()
	fmt.Println(p.Killed(), errors.Is(err, crashtest.ErrKilled))

	p, err = crashtest.Start(ctx, crashtest.Cmd{
		Path:  bin,
		Args:  []string{"-file", filepath.Join(dir, "lines")},
		Stdin: strings.NewReader("hello\n"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := io.ReadAll(p.Stdout())
	fmt.Print(string(out))
	fmt.Println(p.Wait(), p.Killed(), p.ExitCode())
	// Output:
	// true true
	// ok hello
	// <nil> false 0
}

// Arm two failpoints, separated by ";": each write sleeps a millisecond
// before it starts, and the second rename kills the process. Then arm one
// with the error action: the write fails with an injected I/O error, which
// the program reports and exits with.
func ExampleCmd_actions() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "crashtest-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bin, err := crashtest.Build(ctx, "./internal/testprog", dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	file := filepath.Join(dir, "lines")
	p, err := crashtest.Start(ctx, crashtest.Cmd{
		Path:       bin,
		Args:       []string{"-file", file},
		Failpoints: "atomicfile.before-write=sleep(1ms);atomicfile.before-rename=kill@2",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := bufio.NewScanner(p.Stdout())
	for _, line := range []string{"one", "two"} {
		fmt.Fprintln(p.Stdin(), line)
		if out.Scan() {
			fmt.Println(out.Text())
		}
	}
	fmt.Println(p.Wait() != nil, p.Killed())

	p, err = crashtest.Start(ctx, crashtest.Cmd{
		Path:       bin,
		Args:       []string{"-file", file},
		Stdin:      strings.NewReader("three\n"),
		Failpoints: "atomicfile.before-write=error",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = p.Wait()
	fmt.Println(p.ExitCode(), strings.Contains(p.Stderr(), "injected I/O error"))
	// Output:
	// ok one
	// true true
	// 1 true
}

// The toolkit's failpoints say which phases of a server's life reach
// them: a crash test of a server on the harness crashes those of the
// phases it sets up, FailpointsIn(phases...).
func ExampleFailpoints() {
	for _, f := range crashtest.Failpoints() {
		if f.Package == "bootstrap" {
			fmt.Println(f.Name, f.Phases)
		}
	}
	// Output:
	// bootstrap.after-dirs [install]
	// bootstrap.after-defaults [install]
	// bootstrap.after-git-init [install]
	// bootstrap.after-initial-commit [install]
	// bootstrap.before-migration [upgrade]
	// bootstrap.after-migration [upgrade]
	// bootstrap.before-stamp [restart install upgrade]
}
