package crashtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

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
