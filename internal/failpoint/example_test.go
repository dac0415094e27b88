package failpoint_test

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// Arm a point to fail with an injected I/O error; tests of other processes
// set MCPKEEP_FAILPOINTS instead.
func ExampleHit() {
	defer failpoint.Set("")
	fmt.Println(failpoint.Hit("atomicfile.before-rename"))

	_ = failpoint.Set("atomicfile.before-rename=error")
	err := failpoint.Hit("atomicfile.before-rename")
	fmt.Println(errors.Is(err, syscall.EIO), err)
	// Output:
	// <nil>
	// true failpoint atomicfile.before-rename: injected I/O error
}
