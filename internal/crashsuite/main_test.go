package crashsuite_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// binSet holds the paths of the binaries under test.
type binSet struct {
	helios  string // cmd/helios
	mcpkeep string // cmd/mcpkeep
	next    string // heliosnext: helios's schema 2, for the migration points
}

var built struct {
	once sync.Once
	dir  string
	set  binSet
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// binaries builds the binaries once per test binary run, into a directory
// any user may read: the EACCES test runs helios as nobody.
func binaries(t *testing.T) binSet {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "crashsuite-bin-")
		if built.err != nil {
			return
		}
		if built.err = os.Chmod(built.dir, 0o755); built.err != nil {
			return
		}
		for pkg, dst := range map[string]*string{
			"github.com/mcpkeep/mcpkeep/cmd/helios":                              &built.set.helios,
			"github.com/mcpkeep/mcpkeep/cmd/mcpkeep":                             &built.set.mcpkeep,
			"github.com/mcpkeep/mcpkeep/internal/crashsuite/internal/heliosnext": &built.set.next,
		} {
			if *dst, built.err = crashtest.Build(context.Background(), pkg, built.dir); built.err != nil {
				built.err = fmt.Errorf("build %s: %w", pkg, built.err)
				return
			}
			if built.err = os.Chmod(*dst, 0o755); built.err != nil {
				return
			}
		}
	})
	require.NoError(t, built.err)
	return built.set
}
