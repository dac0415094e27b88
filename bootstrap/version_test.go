package bootstrap_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
)

// TestToolkitVersionSaysWhatItIs: a test binary is a local build with no
// commit recorded, and says so rather than a bare "devel".
func TestToolkitVersionSaysWhatItIs(t *testing.T) {
	v := bootstrap.ToolkitVersion()
	assert.True(t, strings.HasPrefix(v, "devel ("), "a local build says devel and why: %q", v)
	assert.Contains(t, v, "no commit recorded")
}

// TestToolkitVersionWithReplace builds a server the way a newcomer does
// while trying the toolkit out: its own module, with mcpkeep required at
// v0.0.0 and replaced by a local checkout. ToolkitVersion names the
// directory instead of the meaningless v0.0.0.
func TestToolkitVersionWithReplace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program in a module of its own")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	files := map[string]string{
		"go.mod": "module example.com/notes\n\ngo 1.26\n\nrequire github.com/mcpkeep/mcpkeep v0.0.0\n\n" +
			"replace github.com/mcpkeep/mcpkeep => " + root + "\n",
		"go.sum": string(gosum),
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/mcpkeep/mcpkeep/bootstrap\"\n)\n\n" +
			"func main() { fmt.Print(bootstrap.ToolkitVersion()) }\n",
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600))
	}
	exe := filepath.Join(dir, "notes")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	// -mod=mod fills in the requirements mcpkeep's go.mod brings. The
	// module cache holds most of them once this module has built, but not
	// every go.mod the new module's graph reads (on a fresh machine
	// filepath-securejoin's go-spew v1.1.1 was missing until another
	// package's test happened to fetch it), so the configured GOPROXY
	// stays as a newcomer's would.
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(exe).Output()
	require.NoError(t, err)
	assert.Equal(t, "devel (local directory "+root+", by a replace directive in go.mod)", string(out))
}
