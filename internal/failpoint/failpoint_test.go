package failpoint_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

func TestParse(t *testing.T) {
	got, err := failpoint.Parse(" atomicfile.before-rename=kill ; gitstore.before-ref=error;atomicfile.before-write=sleep(50ms);atomicfile.before-fsync=kill@3 ")
	require.NoError(t, err)
	assert.Equal(t, map[string]failpoint.Action{
		"atomicfile.before-rename": {Kind: "kill"},
		"gitstore.before-ref":      {Kind: "error"},
		"atomicfile.before-write":  {Kind: "sleep", Sleep: 50 * time.Millisecond},
		"atomicfile.before-fsync":  {Kind: "kill", On: 3},
	}, got)

	for _, bad := range []string{
		"nope.point=kill",
		"atomicfile.before-rename",
		"atomicfile.before-rename=explode",
		"atomicfile.before-rename=sleep(soon)",
		"atomicfile.before-rename=kill@0",
		"atomicfile.before-rename=kill@x",
	} {
		_, err := failpoint.Parse(bad)
		assert.Error(t, err, bad)
	}
	got, err = failpoint.Parse("")
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestHitActions(t *testing.T) {
	t.Cleanup(func() { failpoint.Set("") })
	assert.NoError(t, failpoint.Hit("atomicfile.before-write"), "unarmed")
	assert.False(t, failpoint.Armed())

	require.NoError(t, failpoint.Set("atomicfile.before-write=error"))
	assert.True(t, failpoint.Armed())
	err := failpoint.Hit("atomicfile.before-write")
	require.ErrorIs(t, err, failpoint.ErrInjected)
	require.ErrorIs(t, err, syscall.EIO)
	var ie *failpoint.InjectedError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "atomicfile.before-write", ie.Name)
	assert.NoError(t, failpoint.Hit("atomicfile.before-rename"), "other points stay unarmed")

	require.NoError(t, failpoint.Set("atomicfile.before-write=error@2"))
	assert.NoError(t, failpoint.Hit("atomicfile.before-write"))
	assert.Error(t, failpoint.Hit("atomicfile.before-write"))
	assert.NoError(t, failpoint.Hit("atomicfile.before-write"))

	require.NoError(t, failpoint.Set("atomicfile.before-write=sleep(1ms)"))
	assert.NoError(t, failpoint.Hit("atomicfile.before-write"))
	assert.Error(t, failpoint.Set("bogus=kill"))
}

func TestHelperKill(t *testing.T) {
	if os.Getenv("FAILPOINT_HELPER") == "" {
		return
	}
	failpoint.Hit("atomicfile.before-rename")
	os.Exit(0) // not reached when armed with kill
}

func TestKillFromEnvironment(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperKill$")
	cmd.Env = append(os.Environ(), "FAILPOINT_HELPER=1", failpoint.EnvVar+"=atomicfile.before-rename=kill")
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL)

	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperKill$")
	cmd.Env = append(os.Environ(), "FAILPOINT_HELPER=1")
	assert.NoError(t, cmd.Run(), "unarmed, the helper exits normally")
}

// TestEveryHitIsListed keeps failpoint.Names true: every Hit in the module
// names a listed point, and every listed point is hit somewhere.
func TestEveryHitIsListed(t *testing.T) {
	root := moduleRoot(t)
	hit := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Hit" || len(call.Args) != 1 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "failpoint" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				t.Errorf("%s: failpoint.Hit with a non-literal name", p)
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			hit[name] = p
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, hit)
	for name, file := range hit {
		assert.True(t, slices.Contains(failpoint.Names, name), "%s hits %q, which is not in failpoint.Names", file, name)
	}
	for _, name := range failpoint.Names {
		assert.Contains(t, hit, name, "failpoint.Names lists %q but nothing hits it", name)
	}
	for _, name := range failpoint.Unreached {
		assert.Contains(t, failpoint.Names, name, "failpoint.Unreached lists %q, which is not in Names", name)
	}
	seen := map[string]bool{}
	for _, name := range failpoint.Names {
		assert.False(t, seen[name], "%q listed twice", name)
		seen[name] = true
	}
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}

// BenchmarkHitUnarmed is the cost every failpoint adds in production: one
// atomic load.
func BenchmarkHitUnarmed(b *testing.B) {
	failpoint.Set("")
	for b.Loop() {
		if err := failpoint.Hit("atomicfile.before-rename"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReachCoversNames: every failpoint says how a server reaches it, in
// known phases, and Reach names no other.
func TestReachCoversNames(t *testing.T) {
	for _, name := range failpoint.Names {
		r, ok := failpoint.Reach[name]
		if !assert.True(t, ok, "failpoint.Reach does not say how %q is reached", name) {
			continue
		}
		for _, p := range r.Phases {
			assert.Contains(t, failpoint.Phases, p, "%s: unknown phase", name)
		}
	}
	for name := range failpoint.Reach {
		assert.Contains(t, failpoint.Names, name, "failpoint.Reach lists %q, which is not in Names", name)
	}
	assert.Contains(t, failpoint.Names, failpoint.InterruptChange)
	for _, name := range failpoint.Unreached {
		assert.Empty(t, failpoint.Reach[name].Phases, "%s is in Unreached, but Reach gives it phases", name)
		assert.NotEmpty(t, failpoint.Reach[name].Note, "%s: say who reaches it", name)
	}
}

// TestParseErrorsSayWhatToWrite: a slip in a name gets the name meant, and
// points run together get the separator.
func TestParseErrorsSayWhatToWrite(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"atomicfile.before-renam=kill", `unknown failpoint "atomicfile.before-renam": did you mean atomicfile.before-rename? (crashtest.Failpoints lists them all)`},
		{"before-pack=kill", `unknown failpoint "before-pack": did you mean gitstore.before-pack? (crashtest.Failpoints lists them all)`},
		{"gitstore.befor-ref=error", `unknown failpoint "gitstore.befor-ref": did you mean gitstore.before-ref? (crashtest.Failpoints lists them all)`},
		{"nosuch.point=kill", `unknown failpoint "nosuch.point" (crashtest.Failpoints lists them all)`},
		{"atomicfile.before-rename=kill,gitstore.before-ref=kill",
			`atomicfile.before-rename: action "kill,gitstore.before-ref=kill" holds another failpoint: separate them with ";", not ","`},
		{"atomicfile.before-rename=kill gitstore.before-ref=kill",
			`atomicfile.before-rename: action "kill gitstore.before-ref=kill" holds another failpoint: separate them with ";"`},
		{"atomicfile.before-rename=explode", `atomicfile.before-rename: unknown action "explode": want kill, error or sleep(DURATION)`},
	}
	for _, tt := range tests {
		_, err := failpoint.Parse(tt.spec)
		assert.EqualError(t, err, tt.want, tt.spec)
	}
}
