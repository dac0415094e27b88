package lifecycle_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// The first TryLock wins; a second one, from this or any process, gets a
// *LockedError naming the holder until the lock is released.
func ExampleTryLock() {
	home, _ := os.MkdirTemp("", "home")
	defer os.RemoveAll(home)

	first, err := lifecycle.TryLock(home)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = lifecycle.TryLock(home)
	var le *lifecycle.LockedError
	fmt.Println(errors.Is(err, lifecycle.ErrLocked), errors.As(err, &le) && le.PID == os.Getpid())

	first.Unlock()
	second, err := lifecycle.TryLock(home)
	fmt.Println(err)
	second.Unlock()
	// Output:
	// true true
	// <nil>
}
