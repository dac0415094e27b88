// Command testprog is the crash victim of crashtest's own tests. It appends
// each line read from standard input to a file, rewriting the file with
// atomicfile.WriteFile (so the atomicfile failpoints fire in it), and only
// then acknowledges the line on standard output as "ok LINE". At start it
// removes orphan temporary files and refuses a file that is not whole lines.
// At end of input it exits 0.
//
// Flags:
//
//	-file PATH   the file to append to (required)
//	-ack-early   the bug the tests must catch: acknowledge before writing
//	-fail        write a message to stderr and exit with status 3
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

func main() {
	file := flag.String("file", "", "the file to append to")
	ackEarly := flag.Bool("ack-early", false, "acknowledge a line before it is durable (a deliberate bug)")
	fail := flag.Bool("fail", false, "exit with status 3 at once")
	flag.Parse()
	if *fail {
		fmt.Fprintln(os.Stderr, "testprog: failing on purpose (-fail)")
		os.Exit(3)
	}
	if *file == "" {
		fmt.Fprintln(os.Stderr, "testprog: -file is required")
		os.Exit(2)
	}
	if err := run(*file, *ackEarly); err != nil {
		fmt.Fprintln(os.Stderr, "testprog:", err)
		os.Exit(1)
	}
}

func run(file string, ackEarly bool) error {
	if _, err := atomicfile.CleanTemps(filepath.Dir(file)); err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return fmt.Errorf("%s: torn: the last line has no newline", file)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := in.Bytes()
		if len(line) == 0 || bytes.IndexByte(line, '\n') >= 0 {
			continue
		}
		data = append(append(data, line...), '\n')
		if ackEarly {
			if _, err := fmt.Printf("ok %s\n", line); err != nil {
				return err
			}
		}
		if err := atomicfile.WriteFile(file, data, 0o600); err != nil {
			return err
		}
		if !ackEarly {
			if _, err := fmt.Printf("ok %s\n", line); err != nil {
				return err
			}
		}
	}
	return in.Err()
}
