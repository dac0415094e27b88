package crashtest_test

import (
	"fmt"
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
