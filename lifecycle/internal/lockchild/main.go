// Command lockchild is a test helper of package lifecycle: it tries the
// lock of the home named by its first argument once, prints "won" or
// "locked <pid>" (or "error ..."), and if it won holds the lock until stdin
// closes. It is a separate small binary so that tests can race a hundred of
// them quickly.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: lockchild HOME")
		os.Exit(2)
	}
	l, err := lifecycle.TryLock(os.Args[1])
	if err != nil {
		var le *lifecycle.LockedError
		if errors.As(err, &le) {
			fmt.Printf("locked %d\n", le.PID)
		} else {
			fmt.Printf("error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		}
		return
	}
	fmt.Println("won")
	io.Copy(io.Discard, os.Stdin)
	if err := l.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, "unlock:", err)
		os.Exit(1)
	}
}
