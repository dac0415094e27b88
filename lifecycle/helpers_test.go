package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// lockChild is the path of the lockchild helper binary, built once by
// TestMain.
var lockChild string

func TestMain(m *testing.M) {
	if home := os.Getenv(rollbackChildEnv); home != "" {
		os.Exit(rollbackChild(home)) // a child of TestRollbackKilledAnywhere
	}
	dir, err := os.MkdirTemp("", "lifecycle-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lockChild = filepath.Join(dir, "lockchild")
	build := exec.Command("go", "build", "-o", lockChild, "./internal/lockchild")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build lockchild:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if benchHomes.dir != "" {
		os.RemoveAll(benchHomes.dir)
	}
	os.Exit(code)
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}
