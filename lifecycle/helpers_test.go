package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// lockChild and mainChild are the paths of the lockchild and mainchild
// helper binaries, built once by TestMain.
var lockChild, mainChild string

func TestMain(m *testing.M) {
	if home := os.Getenv(rollbackChildEnv); home != "" {
		os.Exit(rollbackChild(home)) // a child of TestRollbackKilledAnywhere
	}
	dir, err := os.MkdirTemp("", "lifecycle-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lockChild, mainChild = filepath.Join(dir, "lockchild"), filepath.Join(dir, "mainchild")
	for _, bin := range []string{lockChild, mainChild} {
		build := exec.Command("go", "build", "-o", bin, "./internal/"+filepath.Base(bin))
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", filepath.Base(bin)+":", err)
			os.Exit(1)
		}
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
