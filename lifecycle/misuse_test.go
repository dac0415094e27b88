package lifecycle_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// TestNewcomerMistakes: each mistake a newcomer makes with New, Run and
// Main is an error from the call they made, never a panic: an
// *OptionsError naming the field they set, or an error matching a
// sentinel or the cause, whose message names the file or field and the
// fix. Main exits with the status its doc gives for it and writes the
// error to stderr. Run leaves the home unlocked.
func TestNewcomerMistakes(t *testing.T) {
	errBuild := errors.New("notes: cannot open the index")
	tests := []struct {
		name   string
		change func(t *testing.T, o *lifecycle.Options)
		field  string   // the *OptionsError's Field, or ""
		is     error    // what the error matches, or nil
		says   []string // what the message holds besides: the file, the fix
		status int      // Main's exit status
	}{
		{"the zero Options", func(_ *testing.T, o *lifecycle.Options) { *o = lifecycle.Options{} },
			"Name", nil, []string{"give the server's name"}, lifecycle.ExitOptions},
		{"only a Name", func(_ *testing.T, o *lifecycle.Options) { *o = lifecycle.Options{Name: "notes"} },
			"Home", nil, []string{"give the home directory", `filepath.Join(home, ".notes")`, "os.UserHomeDir()"}, lifecycle.ExitOptions},
		{"no NewServer", func(_ *testing.T, o *lifecycle.Options) { o.NewServer = nil },
			"NewServer", nil, []string{"give the function that builds the *mcp.Server"}, lifecycle.ExitOptions},
		{"a home with a ~", func(_ *testing.T, o *lifecycle.Options) { o.Home = "~/.notes" },
			"Home", nil, []string{`"~/.notes"`, "os.UserHomeDir()"}, lifecycle.ExitOptions},
		{"a relative home", func(_ *testing.T, o *lifecycle.Options) { o.Home = "relative/home" },
			"Home", nil, []string{`"relative/home"`, "absolute", "os.UserHomeDir()", "filepath.Abs"}, lifecycle.ExitOptions},
		{"stdio off and no HTTP", func(_ *testing.T, o *lifecycle.Options) { o.NoStdio = true },
			"NoStdio", nil, []string{"set HTTP"}, lifecycle.ExitOptions},
		{"HTTP without a port", func(_ *testing.T, o *lifecycle.Options) { o.HTTP = "localhost" },
			"HTTP", nil, []string{"127.0.0.1:0"}, lifecycle.ExitOptions},
		{"a negative schema", func(_ *testing.T, o *lifecycle.Options) { o.Spec.Schema = -1 },
			"Spec.Schema", nil, []string{"1 or more"}, lifecycle.ExitOptions},
		{"a migration without Apply", func(_ *testing.T, o *lifecycle.Options) {
			o.Spec.Schema, o.Spec.Migrations = 2, []bootstrap.Migration{{From: 1, To: 2, Name: "split"}}
		}, "Spec.Migrations[0]", nil, []string{`"split"`, "give the function that moves a home's files from v1 to v2"}, lifecycle.ExitOptions},
		{"migrations without a schema", func(_ *testing.T, o *lifecycle.Options) {
			o.Spec = bootstrap.Spec{Migrations: []bootstrap.Migration{{From: 1, To: 2, Apply: func(context.Context, string) error { return nil }}}}
		}, "Spec.Schema", nil, []string{"give the schema the last migration reaches"}, lifecycle.ExitOptions},
		{"a directory outside the home", func(_ *testing.T, o *lifecycle.Options) { o.Spec.Dirs = []string{"../cache"} },
			"Spec.Dirs[0]", nil, []string{`"../cache"`, "give a relative path"}, lifecycle.ExitOptions},
		{"default files that are not there", func(_ *testing.T, o *lifecycle.Options) { o.Spec.Defaults = os.DirFS("/nonexistent/defaults") },
			"Spec.Defaults", nil, []string{"an fs.Sub of an embed.FS with the embedded directory's path"}, lifecycle.ExitOptions},
		{"default files that are not there, on an installed home", func(t *testing.T, o *lifecycle.Options) {
			require.NoError(t, run(t, *o).stop(t))
			o.Spec.Defaults = os.DirFS("/nonexistent/defaults")
		}, "Spec.Defaults", nil, []string{"cannot be read"}, lifecycle.ExitOptions},
		{"a default file that does not parse", func(_ *testing.T, o *lifecycle.Options) {
			o.Spec.Defaults = fstest.MapFS{"x.yaml": {Data: []byte("a: [\n")}}
		}, "Spec.Defaults", nil, []string{"lifecycle: Options.Spec.Defaults holds x.yaml, which the first start would quarantine as corrupt: " +
			"x.yaml:1: corrupt: yaml: line 1: did not find expected node content; make it content that parses as YAML"}, lifecycle.ExitOptions},
		{"a default file Validate refuses", func(_ *testing.T, o *lifecycle.Options) {
			o.Spec.Defaults, o.Validate = fstest.MapFS{"a.yaml": {Data: []byte("a: 0\n")}}, positiveA
		}, "Spec.Defaults", nil, []string{"lifecycle: Options.Spec.Defaults holds a.yaml, which the first start would quarantine as corrupt: " +
			"a must be positive; make it content Options.Validate accepts"}, lifecycle.ExitOptions},
		{"a schema raised without a migration", func(t *testing.T, o *lifecycle.Options) {
			require.NoError(t, run(t, *o).stop(t))
			o.Spec.Schema = 2
		}, "Spec.Migrations", nil, []string{"lifecycle: Options.Spec.Migrations has no migration from schema 1, the schema of the home ",
			", toward Spec.Schema 2: add a bootstrap.Migration{From: 1, To: 2, Apply: ...} that moves the home's files from schema 1 to 2, " +
				"or keep Spec.Schema at 1; the home is left as it was"}, lifecycle.ExitOptions},
		{"a home that is a file", func(t *testing.T, o *lifecycle.Options) {
			require.NoError(t, os.WriteFile(o.Home, []byte("mine"), 0o600))
		}, "Home", nil, []string{"is a file, not a directory", "give the path of a directory"}, lifecycle.ExitOptions},
		{"a home inside a file", func(t *testing.T, o *lifecycle.Options) {
			require.NoError(t, os.WriteFile(o.Home, []byte("mine"), 0o600))
			o.Home = filepath.Join(o.Home, "home")
		}, "Home", nil, []string{"which is a file", "move the file away"}, lifecycle.ExitOptions},
		{"a home that cannot be created", func(t *testing.T, o *lifecycle.Options) {
			o.Home = unwritableHome(t)
		}, "Home", nil, []string{"cannot be created", "give a directory this user can create"}, lifecycle.ExitOptions},
		{"a home holding a user's files", func(t *testing.T, o *lifecycle.Options) {
			require.NoError(t, os.Mkdir(o.Home, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(o.Home, "thesis.txt"), []byte("mine"), 0o600))
		}, "Home", lifecycle.ErrNotHome, []string{"thesis.txt"}, lifecycle.ExitOptions},
		{"a home of a newer schema", func(t *testing.T, o *lifecycle.Options) {
			newer := *o
			newer.Spec.Schema = 2
			newer.Spec.Migrations = []bootstrap.Migration{{From: 1, To: 2, Apply: func(context.Context, string) error { return nil }}}
			require.NoError(t, run(t, newer).stop(t))
		}, "", bootstrap.ErrTooNew, []string{".version", "upgrade this server"}, lifecycle.ExitError},
		{"NewServer returns nil", func(_ *testing.T, o *lifecycle.Options) {
			o.NewServer = func(*lifecycle.Env) (*mcp.Server, error) { return nil, nil }
		}, "NewServer", nil, []string{"return the server it built"}, lifecycle.ExitOptions},
		{"NewServer fails", func(_ *testing.T, o *lifecycle.Options) {
			o.NewServer = func(*lifecycle.Env) (*mcp.Server, error) { return nil, errBuild }
		}, "", errBuild, nil, lifecycle.ExitError},
		{"a tool whose argument is not a struct", func(_ *testing.T, o *lifecycle.Options) {
			o.NewServer = func(*lifecycle.Env) (*mcp.Server, error) {
				s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0"}, nil)
				mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, string) (*mcp.CallToolResult, any, error) {
					return nil, nil, nil
				})
				return s, nil
			}
		}, "NewServer", nil, []string{"panicked", `AddTool "echo"`, "not a struct"}, lifecycle.ExitOptions},
		{"a home in use, Exclusive", func(t *testing.T, o *lifecycle.Options) {
			o.Exclusive = true
			l, err := lifecycle.TryLock(o.Home)
			require.NoError(t, err)
			t.Cleanup(func() { l.Unlock() })
		}, "", lifecycle.ErrLocked, []string{"stop it or use another home"}, lifecycle.ExitInUse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := options(t)
			tt.change(t, &opts)
			h, err := lifecycle.New(opts)
			if err == nil {
				err = h.Run(t.Context())
			}
			require.Error(t, err)
			if tt.field != "" {
				var oe *lifecycle.OptionsError
				require.ErrorAs(t, err, &oe, "%v", err)
				assert.Equal(t, tt.field, oe.Field, "%v", err)
				assert.Contains(t, err.Error(), "Options."+tt.field+" ", "the message names the field")
				assert.NotContains(t, err.Error(), ": lifecycle: ", "one prefix")
			}
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			for _, s := range tt.says {
				assert.Contains(t, err.Error(), s)
			}
			if fi, serr := os.Stat(opts.Home); serr == nil && fi.IsDir() && tt.is != lifecycle.ErrLocked {
				l, lerr := lifecycle.TryLock(opts.Home)
				require.NoError(t, lerr, "Run left the home locked")
				l.Unlock()
			}

			var stderr bytes.Buffer
			opts.Stdin = strings.NewReader("")
			assert.Equal(t, tt.status, lifecycle.RunMain(t.Context(), opts, &stderr), "Main's exit status; stderr:\n%s", &stderr)
			name := opts.Name
			if name == "" {
				name = "mcp server"
			}
			assert.Contains(t, stderr.String(), name+": ", "Main says why on stderr")
		})
	}
}

// unwritableHome returns a home this user cannot create: below a
// directory it may not write, or, for root, who may write anywhere, below
// /proc, where nothing can be created.
func unwritableHome(t *testing.T) string {
	if os.Geteuid() != 0 {
		parent := filepath.Join(t.TempDir(), "readonly")
		require.NoError(t, os.Mkdir(parent, 0o500))
		return filepath.Join(parent, "home")
	}
	if runtime.GOOS != "linux" {
		t.Skip("as root, only Linux's /proc refuses a new directory")
	}
	return "/proc/mcpkeep-test/home"
}

// TestRunWithoutNew: Run on a nil *Harness (New's error not checked) or a
// zero one (a struct literal) returns ErrNoHarness instead of panicking.
func TestRunWithoutNew(t *testing.T) {
	var nilHarness *lifecycle.Harness
	require.ErrorIs(t, nilHarness.Run(t.Context()), lifecycle.ErrNoHarness)
	require.ErrorIs(t, new(lifecycle.Harness).Run(t.Context()), lifecycle.ErrNoHarness)
}

// TestToolPanicFailsTheCall: a tool that panics (a newcomer's nil map)
// fails its call with a tool error that says so, instead of killing the
// process and every client of the home; the server serves on and stops
// cleanly.
func TestToolPanicFailsTheCall(t *testing.T) {
	opts := options(t)
	opts.NewServer = func(env *lifecycle.Env) (*mcp.Server, error) {
		s, err := newServer(env)
		mcp.AddTool(s, &mcp.Tool{Name: "boom"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			var counts map[string]int
			counts["calls"]++ // panics: assignment to entry in nil map
			return nil, nil, nil
		})
		return s, err
	}
	r := run(t, opts)
	res, err := r.client.CallTool(t.Context(), &mcp.CallToolParams{Name: "boom"})
	require.NoError(t, err, "the call gets an answer")
	assert.True(t, res.IsError)
	require.Len(t, res.Content, 1)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `tool "boom" failed: the server panicked (assignment to entry in nil map)`)

	res, err = r.client.CallTool(t.Context(), &mcp.CallToolParams{Name: "state"})
	require.NoError(t, err, "the server serves on")
	assert.False(t, res.IsError)
	require.NoError(t, r.stop(t))
}

// TestChangeAfterClose: a change through an Env whose home was closed
// (OpenHome's close func was called, or Harness.Run returned) is an error
// from the call made, matching gitstore.ErrClosed, that says the home is
// closed, that nothing was changed and what to do; it commits nothing, a
// hand edit waiting in the work tree included.
func TestChangeAfterClose(t *testing.T) {
	homes := []struct {
		name  string
		close func(t *testing.T) *lifecycle.Env // returns the closed home's Env
	}{
		{"OpenHome's close func", func(t *testing.T) *lifecycle.Env {
			env, _, closeEnv := openUpdateHome(t)
			require.NoError(t, closeEnv())
			return env
		}},
		{"Harness.Run returned", func(t *testing.T) *lifecycle.Env {
			opts := options(t)
			var env *lifecycle.Env
			opts.NewServer = func(e *lifecycle.Env) (*mcp.Server, error) {
				env = e
				return newServer(e)
			}
			require.NoError(t, run(t, opts).stop(t))
			return env
		}},
	}
	changes := []struct {
		call   string // as the error names it
		change func(ctx context.Context, env *lifecycle.Env) error
	}{
		{`Update(ctx, "m", fn)`, func(ctx context.Context, env *lifecycle.Env) error {
			_, err := env.Update(ctx, "m", func(tx *lifecycle.Tx) error { return tx.WriteFile("new.yaml", []byte("new: 1\n")) })
			return err
		}},
		{`Commit("m")`, func(_ context.Context, env *lifecycle.Env) error {
			_, err := env.Commit("m")
			return err
		}},
		{`Rollback(ctx, "HEAD~1")`, func(ctx context.Context, env *lifecycle.Env) error {
			_, err := env.Rollback(ctx, "HEAD~1")
			return err
		}},
	}
	for _, home := range homes {
		for _, c := range changes {
			t.Run(home.name+"/"+c.call, func(t *testing.T) {
				env := home.close(t)
				require.NotNil(t, env)
				// Something to change for each: a hand edit to commit,
				// and a commit before HEAD to roll back to.
				store, err := gitstore.Open(env.ConfigDir, &gitstore.Options{HoldsLock: true})
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(env.ConfigDir, "hand.yaml"), []byte("by: hand\n"), 0o600))
				_, err = store.Commit("a second commit")
				require.NoError(t, err)
				require.NoError(t, store.Close())
				require.NoError(t, os.WriteFile(filepath.Join(env.ConfigDir, "hand.yaml"), []byte("by: hand, again\n"), 0o600))
				before := gitHead(t, env.ConfigDir)

				err = c.change(t.Context(), env)
				require.ErrorIs(t, err, gitstore.ErrClosed)
				for _, s := range []string{"lifecycle: " + c.call + ": ", "the home " + env.Home + " is closed",
					"nothing was changed", "open it again with lifecycle.OpenHome"} {
					assert.Contains(t, err.Error(), s)
				}
				assert.Equal(t, before, gitHead(t, env.ConfigDir), "nothing committed")
				_, err = os.Stat(filepath.Join(env.ConfigDir, "new.yaml"))
				assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")
			})
		}
	}
}

// TestChangeOnAZeroEnv: a change through an Env made as a struct literal
// (no Store, no ConfigDir) is an error naming the method called and the
// fix, never a panic.
func TestChangeOnAZeroEnv(t *testing.T) {
	for _, tc := range []struct {
		method string
		change func(env *lifecycle.Env) error
	}{
		{"Update", func(env *lifecycle.Env) error {
			_, err := env.Update(t.Context(), "m", func(*lifecycle.Tx) error { return nil })
			return err
		}},
		{"Rollback", func(env *lifecycle.Env) error {
			_, err := env.Rollback(t.Context(), "HEAD~1")
			return err
		}},
		{"Commit", func(env *lifecycle.Env) error {
			_, err := env.Commit("m")
			return err
		}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			err := tc.change(&lifecycle.Env{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "lifecycle: "+tc.method+" on an Env without a Store")
			assert.Contains(t, err.Error(), "make it with a Harness or OpenHome")
		})
	}
}

// gitHead returns the commit HEAD names in the repository at dir, as a
// new reader of it sees it.
func gitHead(t *testing.T, dir string) string {
	t.Helper()
	store, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer store.Close()
	head, err := store.Head()
	require.NoError(t, err)
	return head
}

// TestRefusedSpecWritesNothing: a Spec refused at start (a default file
// that would be quarantined, a schema raised without a migration) leaves
// the home as it was: a fresh one is not created, an installed one keeps
// its files, its stamp and its history.
func TestRefusedSpecWritesNothing(t *testing.T) {
	t.Run("a default file that does not parse", func(t *testing.T) {
		opts := options(t)
		opts.Spec.Defaults = fstest.MapFS{"x.yaml": {Data: []byte("a: [\n")}}
		h, err := lifecycle.New(opts)
		require.NoError(t, err)
		var oe *lifecycle.OptionsError
		require.ErrorAs(t, h.Run(t.Context()), &oe)
		_, err = os.Stat(opts.Home)
		assert.ErrorIs(t, err, os.ErrNotExist, "the home is not created")
	})
	t.Run("a schema raised without a migration", func(t *testing.T) {
		opts := options(t)
		require.NoError(t, run(t, opts).stop(t))
		before := homeFiles(t, opts.Home)
		opts.Spec.Schema = 2
		h, err := lifecycle.New(opts)
		require.NoError(t, err)
		var oe *lifecycle.OptionsError
		require.ErrorAs(t, h.Run(t.Context()), &oe)
		assert.Equal(t, before, homeFiles(t, opts.Home))
	})
}

// homeFiles is treeOf(home) without the lock's files.
func homeFiles(t *testing.T, home string) map[string]string {
	t.Helper()
	files := treeOf(t, home)
	for p := range files {
		if strings.HasPrefix(filepath.Base(p), lifecycle.LockFile) {
			delete(files, p) // taken and given up
		}
	}
	return files
}
