package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/barrier"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// openUpdateHome installs a home with config/a.yaml = "a: 0" (and
// d/b.yaml) and opens it for Env.Update.
func openUpdateHome(t *testing.T) (*lifecycle.Env, string, func() error) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	_, err := bootstrap.Ensure(t.Context(), bootstrap.Spec{Home: home, Schema: 1,
		Defaults: fstest.MapFS{"a.yaml": {Data: []byte("a: 0\n")}, "d/b.yaml": {Data: []byte("b: 0\n")}}})
	require.NoError(t, err)
	env, closeEnv, err := lifecycle.OpenHome(home, nil)
	require.NoError(t, err)
	t.Cleanup(func() { closeEnv() })
	return env, filepath.Join(env.ConfigDir, "a.yaml"), closeEnv
}

// positiveA is an Options.Validate: a.yaml's a, if a number, must be
// above 0.
func positiveA(rel string, data []byte) error {
	if rel != "a.yaml" {
		return nil
	}
	var v struct{ A any }
	if err := atomicfile.ParseYAML(rel, data, &v); err != nil {
		return err
	}
	if n, ok := v.A.(int); ok && n <= 0 {
		return errors.New("a must be positive")
	}
	return nil
}

func writeA(value string) func(*lifecycle.Tx) error {
	return func(tx *lifecycle.Tx) error { return tx.WriteFile("a.yaml", []byte("a: "+value+"\n")) }
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "<none>"
	}
	require.NoError(t, err)
	return string(b)
}

// TestUpdateMisuse: every misuse a newcomer can make of Update, Tx and
// Rollback is an error from the call they made, naming it and what to
// fix; none panics (but
// a panic of fn's own continues, as in bbolt), an error or a panic after
// a write rolls it back, none leaves a checkpoint, none writes or commits
// anything, and none commits a file the transaction did not write, a
// hand edit beside a proper change included.
func TestUpdateMisuse(t *testing.T) {
	var escaped *lifecycle.Tx
	var configDir string   // of the subtest's home
	var cur *lifecycle.Env // the subtest's
	for _, tc := range []struct {
		name    string
		ctxNil  bool
		ctxDone bool // the context is cancelled before the call
		msg     string
		fn      func(*lifecycle.Tx) error
		setup   func(t *testing.T, env *lifecycle.Env)
		badPath bool   // the error matches ErrBadPath
		corrupt bool   // the error holds a *atomicfile.CorruptError
		nested  bool   // the error matches ErrNested
		says    string // the error says this
		panics  any    // fn panics with this, and Update lets it continue
		commits bool   // a proper change: it commits fn's files and no others
		// rollback makes the call Rollback(ctx, rev) instead of Update.
		rollback bool
		rev      string
	}{
		{name: "nil fn", msg: "m", says: "fn is nil"},
		{name: "nil ctx", ctxNil: true, msg: "m", fn: writeA("1"), says: "pass a context"},
		{name: "cancelled ctx", ctxDone: true, msg: "m", fn: writeA("1"), says: `Update(ctx, "m", fn): context canceled before it began; nothing was changed`},
		{name: "empty message", msg: " ", fn: writeA("1"), says: "msg is empty"},
		// The words a lost stamp's schema is read from are bootstrap's.
		{name: "an install's words", msg: "install: schema 9 -- my note", fn: writeA("1"), says: "msg begins as the install and migrate commits of bootstrap do"},
		{name: "a migration's words", msg: "migrate v1→v9", fn: writeA("1"), says: "give the change other words"},
		{name: "empty path", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("", []byte("x")) },
			badPath: true, says: `tx.WriteFile(""): the path is empty`},
		{name: "outside ConfigDir", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("../notes.yaml", []byte("x")) },
			badPath: true, says: `tx.WriteFile("../notes.yaml"): the path leaves ConfigDir`},
		{name: ".git/config", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile(".git/config", []byte("x")) },
			badPath: true, says: "inside .git"},
		{name: ".GIT in a subdirectory", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("d/.GIT/hooks", []byte("x")) },
			badPath: true, says: "inside .git"},
		{name: "absolute", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("/etc/passwd", []byte("x")) },
			badPath: true, says: "absolute"},
		{name: "not clean", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("d/../a.yaml", []byte("x")) },
			badPath: true, says: `write it "a.yaml"`},
		{name: "not clean, and outside once clean", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("a/../../x.yaml", []byte("x")) },
			badPath: true, says: `tx.WriteFile("a/../../x.yaml"): the path leaves ConfigDir`},
		{name: "not clean, and in .git once clean", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("d/../.git/config", []byte("x")) },
			badPath: true, says: "inside .git"},
		{name: "temporary name", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile(".a.yaml.mcpkeep-tmp1", []byte("x")) },
			badPath: true, says: "temporary file"},
		{name: "read outside", msg: "m", fn: func(tx *lifecycle.Tx) error { _, err := tx.ReadFile("../.version"); return err },
			badPath: true, says: "leaves ConfigDir"},
		{name: "remove .git", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.Remove(".git") },
			badPath: true, says: "inside .git"},
		{name: "a directory", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("d", []byte("x")) },
			badPath: true, says: "is a directory"},
		{name: "list a symlinked directory", msg: "m",
			setup: func(t *testing.T, env *lifecycle.Env) {
				require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(env.ConfigDir, "out")))
			},
			fn:      func(tx *lifecycle.Tx) error { _, err := tx.List("out"); return err },
			badPath: true, says: `tx.List("out"): "out" is a symbolic link`},
		{name: "list below a symlinked directory", msg: "m",
			setup: func(t *testing.T, env *lifecycle.Env) {
				out := t.TempDir()
				require.NoError(t, os.MkdirAll(filepath.Join(out, "sub"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(out, "sub", "secret-name.yaml"), []byte("x: 1\n"), 0o600))
				require.NoError(t, os.Symlink(out, filepath.Join(env.ConfigDir, "out")))
			},
			fn:      func(tx *lifecycle.Tx) error { _, err := tx.List("out/sub"); return err },
			badPath: true, says: `tx.List("out/sub"): "out" is a symbolic link`},
		{name: "read a directory below a symlinked one", msg: "m",
			setup: func(t *testing.T, env *lifecycle.Env) {
				out := t.TempDir()
				require.NoError(t, os.MkdirAll(filepath.Join(out, "sub"), 0o700))
				require.NoError(t, os.Symlink(out, filepath.Join(env.ConfigDir, "out")))
			},
			fn:   func(tx *lifecycle.Tx) error { _, err := tx.ReadFile("out/sub"); return err },
			says: "out is a symbolic link, not a regular file; it was not read"},
		{name: "read a directory", msg: "m", fn: func(tx *lifecycle.Tx) error { _, err := tx.ReadFile("d"); return err },
			badPath: true, says: `tx.ReadFile("d"): it is a directory; name a file in it`},
		{name: "remove a directory", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.Remove("d") },
			badPath: true, says: `tx.Remove("d"): it is a directory; name a file in it`},
		{name: "YAML of a directory", msg: "m", fn: func(tx *lifecycle.Tx) error { var v any; return tx.ReadYAML("d", &v) },
			badPath: true, says: `tx.ReadYAML("d"): it is a directory`},
		{name: "ConfigDir itself", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile(".", []byte("x")) },
			badPath: true, says: `tx.WriteFile("."): the path names ConfigDir (`},
		{name: "a name too long", msg: "m", fn: func(tx *lifecycle.Tx) error {
			if err := tx.WriteFile("a.yaml", []byte("a: 1\n")); err != nil {
				return err
			}
			return tx.WriteFile("d/"+strings.Repeat("n", 300)+".yaml", []byte("n: 1\n"))
		}, badPath: true, says: "the file's name is 305 bytes, more than the 223 a config file's name may have"},
		{name: "a long directory name", msg: "m", fn: func(tx *lifecycle.Tx) error {
			if err := writeA("1")(tx); err != nil {
				return err
			}
			return tx.WriteFile(strings.Repeat("d", 250)+"/a.yaml", []byte("a: 1\n"))
		}, commits: true},
		{name: "the longest name", msg: "m", fn: func(tx *lifecycle.Tx) error {
			if err := writeA("1")(tx); err != nil {
				return err
			}
			return tx.WriteFile("d/"+strings.Repeat("n", atomicfile.MaxName-5)+".yaml", []byte("n: 1\n"))
		}, commits: true},
		{name: "under a file", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("a.yaml/x", []byte("x")) },
			badPath: true, says: `"a.yaml" is a file`},
		{name: "under a symlinked directory", msg: "m",
			setup: func(t *testing.T, env *lifecycle.Env) {
				require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(env.ConfigDir, "out")))
			},
			fn:      func(tx *lifecycle.Tx) error { return tx.WriteFile("out/x.yaml", []byte("x")) },
			badPath: true, says: `"out" is a symbolic link`},
		{name: "a read through a symlinked directory", msg: "m",
			setup: func(t *testing.T, env *lifecycle.Env) {
				out := t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(out, "x.yaml"), []byte("secret: 1\n"), 0o600))
				require.NoError(t, os.Symlink(out, filepath.Join(env.ConfigDir, "out")))
			},
			fn:   func(tx *lifecycle.Tx) error { _, err := tx.ReadFile("out/x.yaml"); return err },
			says: "out is a symbolic link, not a regular file; it was not read"},
		{name: "an error after a write", msg: "m", fn: func(tx *lifecycle.Tx) error {
			if err := tx.WriteFile("a.yaml", []byte("a: 1\n")); err != nil {
				return err
			}
			return errors.New("changed my mind")
		}, says: "changed my mind"},
		{name: "a panic after a write", msg: "m", fn: func(tx *lifecycle.Tx) error {
			if err := tx.WriteFile("a.yaml", []byte("a: 1\n")); err != nil {
				return err
			}
			panic("boom")
		}, panics: "boom"},
		{name: "a hand edit beside the change", msg: "m",
			setup: func(t *testing.T, env *lifecycle.Env) {
				require.NoError(t, os.WriteFile(filepath.Join(env.ConfigDir, "d", "b.yaml"), []byte("b: by hand\n"), 0o600))
			},
			fn: writeA("1"), commits: true},
		{name: "remove a missing file", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.Remove("missing.yaml") },
			says: "no such file"},
		{name: "a file written around the transaction", msg: "m", fn: func(tx *lifecycle.Tx) error {
			return os.WriteFile(filepath.Join(configDir, "d", "b.yaml"), []byte("b: around\n"), 0o600)
		}},
		{name: "the transaction kept past its function", msg: "m", fn: func(tx *lifecycle.Tx) error { escaped = tx; return nil }},
		{name: "absolute, inside ConfigDir", msg: "m", fn: func(tx *lifecycle.Tx) error {
			return tx.WriteFile(filepath.Join(configDir, "d", "c.yaml"), []byte("x"))
		}, badPath: true, says: `), as "d/c.yaml"`},
		{name: "YAML of a func", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteYAML("m.yaml", func() {}) },
			says: `lifecycle: tx.WriteYAML("m.yaml"): nothing was written: encode m.yaml: cannot marshal type: func()`},
		{name: "JSON of a channel", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteJSON("m.json", make(chan int)) },
			says: `lifecycle: tx.WriteJSON("m.json"): nothing was written: encode m.json: json: unsupported type: chan int`},
		{name: "YAML that does not parse", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("bad.yaml", []byte("a: [\n")) },
			corrupt: true, says: `lifecycle: tx.WriteFile("bad.yaml"): bad.yaml:1: corrupt: yaml: line 1: did not find expected node content ` +
				`(nothing was written: give content that parses as YAML; the next start would quarantine this file as corrupt)`},
		{name: "JSON that does not parse, after a good write", msg: "m", fn: func(tx *lifecycle.Tx) error {
			if err := tx.WriteFile("a.yaml", []byte("a: 1\n")); err != nil {
				return err
			}
			return tx.WriteFile("d/bad.json", []byte(`{"a": `))
		}, corrupt: true, says: `lifecycle: tx.WriteFile("d/bad.json"): d/bad.json:1: corrupt: unexpected EOF ` +
			`(nothing was written: give content that parses as JSON; the next start would quarantine this file as corrupt)`},
		{name: "YAML that gives a key twice", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteFile("dup.yaml", []byte("a: 1\na: 2\n")) },
			corrupt: true, says: `lifecycle: tx.WriteFile("dup.yaml"): dup.yaml:2: corrupt: yaml: unmarshal errors:` + "\n" +
				`  line 2: mapping key "a" already defined at line 1 (nothing was written: give YAML that gives each key of a mapping once; ` +
				`reads of it into a map would fail)`},
		{name: "YAML written as JSON", msg: "m", fn: func(tx *lifecycle.Tx) error { return tx.WriteYAML("m.json", map[string]int{"a": 1}) },
			corrupt: true, says: `lifecycle: tx.WriteYAML("m.json"): m.json:1: corrupt: `},
		{name: "a file Validate refuses", msg: "m",
			setup:   func(_ *testing.T, env *lifecycle.Env) { env.Validate = positiveA },
			fn:      func(tx *lifecycle.Tx) error { return tx.WriteFile("a.yaml", []byte("a: -1\n")) },
			corrupt: true, says: `lifecycle: tx.WriteFile("a.yaml"): a.yaml: corrupt: a must be positive ` +
				`(nothing was written: give content Options.Validate accepts; the next start would quarantine this file as corrupt)`},
		{name: "a value Validate refuses", msg: "m",
			setup:   func(_ *testing.T, env *lifecycle.Env) { env.Validate = positiveA },
			fn:      func(tx *lifecycle.Tx) error { return tx.WriteYAML("a.yaml", map[string]int{"a": 0}) },
			corrupt: true, says: `lifecycle: tx.WriteYAML("a.yaml"): a.yaml: corrupt: a must be positive`},
		{name: "Update inside the function", msg: "m", fn: func(tx *lifecycle.Tx) error {
			if err := tx.WriteFile("a.yaml", []byte("a: 1\n")); err != nil {
				return err
			}
			_, err := cur.Update(context.Background(), "inner", writeA("2"))
			return err
		}, nested: true, says: "make the change through that function's tx, or call Update after Update returns"},
		{name: "Commit inside the function", msg: "m", fn: func(tx *lifecycle.Tx) error {
			_, err := cur.Commit("inner")
			return err
		}, nested: true, says: "call Commit after Update returns"},
		{name: "Rollback inside the function", msg: "m", fn: func(tx *lifecycle.Tx) error {
			_, err := cur.Rollback(context.Background(), "HEAD")
			return err
		}, nested: true, says: "call Rollback after Update returns"},
		{name: "Rollback with a nil ctx", rollback: true, ctxNil: true, rev: "HEAD~1",
			says: `lifecycle: Rollback(nil, "HEAD~1"): pass a context`},
		{name: "Rollback with a cancelled ctx", rollback: true, ctxDone: true, rev: "HEAD~1",
			says: `lifecycle: Rollback(ctx, "HEAD~1"): context canceled before it began; nothing was changed`},
		{name: "Rollback to an empty rev", rollback: true, rev: "",
			says: `lifecycle: Rollback(ctx, ""): rev is empty; give a commit hash`},
		{name: "Rollback to a blank rev", rollback: true, rev: " ",
			says: `lifecycle: Rollback(ctx, " "): rev is empty`},
		{name: "Rollback to an unknown rev", rollback: true, rev: "nosuchtag",
			says: `revision "nosuchtag" does not name a commit (use a hash from the history, HEAD~N or a tag)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, path, _ := openUpdateHome(t)
			configDir, cur = env.ConfigDir, env
			before, err := env.Store.Head()
			require.NoError(t, err)
			if tc.setup != nil {
				tc.setup(t, env)
			}
			ctx := t.Context()
			if tc.ctxNil {
				ctx = nil //nolint:staticcheck // the misuse under test
			}
			if tc.ctxDone {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			var hash string
			func() {
				defer func() {
					assert.Equal(t, tc.panics, recover(), "the panic continues, with its own value")
				}()
				if tc.rollback {
					hash, err = env.Rollback(ctx, tc.rev)
					return
				}
				hash, err = env.Update(ctx, tc.msg, tc.fn)
			}()
			switch {
			case tc.panics != nil:
			case tc.says != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.says)
				assert.Equal(t, tc.badPath, errors.Is(err, lifecycle.ErrBadPath), "%v", err)
				var ce *atomicfile.CorruptError
				assert.Equal(t, tc.corrupt, errors.As(err, &ce), "%v", err)
				assert.Equal(t, tc.nested, errors.Is(err, lifecycle.ErrNested), "%v", err)
				assert.Equal(t, tc.ctxDone, errors.Is(err, context.Canceled), "%v", err)
			default:
				require.NoError(t, err)
			}
			mine := before
			if tc.commits {
				require.NotEmpty(t, hash)
				mine = hash
				assert.Equal(t, "a: 1\n", readString(t, path))
			} else {
				assert.Empty(t, hash, "nothing committed")
				assert.Equal(t, "a: 0\n", readString(t, path), "rolled back")
			}
			if escaped != nil {
				err := escaped.WriteFile("a.yaml", []byte("a: late\n"))
				assert.ErrorContains(t, err, "the transaction is over")
				escaped = nil
			}
			// A later, unrelated change does not sweep in what the
			// misuse left in the work tree.
			hash, err = env.Update(t.Context(), "next", writeA("next"))
			require.NoError(t, err)
			for _, f := range []string{"d/b.yaml", "notes.yaml", "a.yaml/x", "out/x.yaml"} {
				got, rerr := env.Store.ReadAt(hash, f)
				if f == "d/b.yaml" {
					require.NoError(t, rerr)
					assert.Equal(t, "b: 0\n", string(got), "only the transaction's files are committed")
				} else {
					assert.ErrorIs(t, rerr, fs.ErrNotExist)
				}
			}
			hist, err := env.Store.History("", 0)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(hist), 2)
			assert.Equal(t, mine, hist[1].Hash, "the misuse committed nothing of its own")
			if tc.commits {
				require.GreaterOrEqual(t, len(hist), 3)
				assert.Equal(t, before, hist[2].Hash)
				got, err := env.Store.ReadAt(hash, "d/b.yaml")
				require.NoError(t, err)
				assert.Equal(t, "b: 0\n", string(got), "the hand edit is not in the change")
			}
			assert.Equal(t, "a: next\n", readString(t, path))
			assert.Equal(t, "<none>", readString(t, filepath.Join(env.Home, "notes.yaml")))
			entries, err := os.ReadDir(filepath.Join(env.Home, recovery.CheckpointsDir))
			require.NoError(t, err)
			assert.Empty(t, entries, "no checkpoint left")
		})
	}
}

// TestUpdatePanics: a panic in fn writes nothing, gives up the turn, and
// continues in the caller with its own value.
func TestUpdatePanics(t *testing.T) {
	env, path, _ := openUpdateHome(t)
	before, err := env.Store.Head()
	require.NoError(t, err)
	func() {
		defer func() {
			assert.Equal(t, "boom", recover())
		}()
		env.Update(t.Context(), "panics", func(tx *lifecycle.Tx) error {
			require.NoError(t, tx.WriteFile("a.yaml", []byte("a: panic\n")))
			panic("boom")
		})
		t.Error("the panic did not continue")
	}()
	assert.Equal(t, "a: 0\n", readString(t, path))
	head, err := env.Store.Head()
	require.NoError(t, err)
	assert.Equal(t, before, head)
	_, err = env.Update(t.Context(), "after", writeA("after"))
	require.NoError(t, err, "the turn was given up")
}

// TestTxReadsAndLists: a transaction reads its own writes and removals
// (ReadYAML of a missing file matches fs.ErrNotExist and leaves its value
// alone), and lists a directory as it would be.
func TestTxReadsAndLists(t *testing.T) {
	env, _, _ := openUpdateHome(t)
	_, err := env.Update(t.Context(), "rw", func(tx *lifecycle.Tx) error {
		b, err := tx.ReadFile("a.yaml")
		require.NoError(t, err)
		assert.Equal(t, "a: 0\n", string(b))
		require.NoError(t, tx.WriteYAML("d/c.yaml", map[string]int{"c": 1}))
		require.NoError(t, tx.Remove("d/b.yaml"))
		var c map[string]int
		require.NoError(t, tx.ReadYAMLStrict("d/c.yaml", &c))
		assert.Equal(t, 1, c["c"])
		_, err = tx.ReadFile("d/b.yaml")
		assert.ErrorIs(t, err, fs.ErrNotExist)
		kept := map[string]int{"default": 1}
		assert.ErrorIs(t, tx.ReadYAML("d/b.yaml", &kept), fs.ErrNotExist, "a removed file, as a missing one")
		assert.ErrorIs(t, tx.ReadYAML("missing.yaml", &kept), fs.ErrNotExist)
		assert.Equal(t, map[string]int{"default": 1}, kept, "v is left as it was")
		list, err := tx.List("d")
		require.NoError(t, err)
		assert.Equal(t, []string{"d/c.yaml"}, list)
		top, err := tx.List("")
		require.NoError(t, err)
		assert.Equal(t, []string{"a.yaml"}, top)
		require.NoError(t, tx.WriteJSON("j.json", map[string]bool{"ok": true}))
		var j map[string]bool
		require.NoError(t, tx.ReadJSONStrict("j.json", &j))
		assert.True(t, j["ok"])
		return nil
	})
	require.NoError(t, err)
	files, err := env.Files()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a.yaml", "d/c.yaml", "j.json"}, files)
}

// TestUpdateErrorSaysWhatToDo: an update failed by a disk error names the
// update, its files and what became of them, and the remedy.
func TestUpdateErrorSaysWhatToDo(t *testing.T) {
	env, path, _ := openUpdateHome(t)
	t.Cleanup(func() { failpoint.Set("") })
	require.NoError(t, failpoint.Set("gitstore.before-intent=error"))

	_, err := env.Update(t.Context(), "set a", writeA("1"))
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorIs(t, err, failpoint.ErrInjected)
	assert.Contains(t, err.Error(), "set a failed, "+path+" unchanged; I/O error: the disk may be failing")
	assert.Equal(t, "a: 0\n", readString(t, path), "nothing written")

	_, err = env.Update(t.Context(), "bad", func(*lifecycle.Tx) error { return errors.New("not a disk error") })
	assert.EqualError(t, err, "not a disk error", "other errors are left as they are")
}

// TestUnfinishedUpdateIsFinishedBeforeTheNext: when an update reached the
// disk but its files could not all be put in place, Update returns its
// hash and an error saying so; the next Update puts them in place first,
// and what both acknowledged survives a restart into a clean home.
func TestUnfinishedUpdateIsFinishedBeforeTheNext(t *testing.T) {
	env, path, closeEnv := openUpdateHome(t)
	t.Cleanup(func() { failpoint.Set("") })
	require.NoError(t, failpoint.Set("gitstore.after-intent=error@1"))
	hash, err := env.Update(t.Context(), "one", writeA("1"))
	require.ErrorIs(t, err, syscall.EIO)
	var ue *gitstore.UnfinishedError
	require.ErrorAs(t, err, &ue)
	assert.NotEmpty(t, hash)
	assert.Contains(t, err.Error(), "the next change, or the next start, puts them in place")
	assert.Equal(t, "a: 0\n", readString(t, path), "not in place yet")

	hash2, err := env.Update(t.Context(), "two", func(tx *lifecycle.Tx) error {
		b, err := tx.ReadFile("a.yaml")
		if err != nil {
			return err
		}
		assert.Equal(t, "a: 1\n", string(b), "the unfinished change is in place before the next runs")
		return tx.WriteFile("d/b.yaml", []byte("b: 2\n"))
	})
	require.NoError(t, err)
	require.NoError(t, closeEnv())

	lock, err := lifecycle.TryLock(env.Home)
	require.NoError(t, err)
	defer lock.Unlock()
	report, err := recovery.Run(t.Context(), recovery.Options{Home: env.Home})
	require.NoError(t, err)
	assert.True(t, report.Clean(), "%s", report)
	assert.Equal(t, "a: 1\n", readString(t, path))
	assert.Equal(t, "b: 2\n", readString(t, filepath.Join(env.ConfigDir, "d", "b.yaml")))
	log := gitCLI(t, env.ConfigDir, "log", "--format=%H %s")
	assert.Contains(t, log, hash+" one")
	assert.Contains(t, log, hash2+" two")
}

func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

// TestHandEditsAreNotSwept: a file edited by hand while the server runs
// is not in a tool's commit; Env.Commit commits it on request.
func TestHandEditsAreNotSwept(t *testing.T) {
	env, _, _ := openUpdateHome(t)
	b := filepath.Join(env.ConfigDir, "d", "b.yaml")
	require.NoError(t, os.WriteFile(b, []byte("b: by hand\n"), 0o600))
	hash, err := env.Update(t.Context(), "a", writeA("1"))
	require.NoError(t, err)
	got, err := env.Store.ReadAt(hash, "d/b.yaml")
	require.NoError(t, err)
	assert.Equal(t, "b: 0\n", string(got))
	assert.Equal(t, "b: by hand\n", readString(t, b), "left as it is")
	hand, err := env.Commit("hand edits")
	require.NoError(t, err)
	got, err = env.Store.ReadAt(hand, "d/b.yaml")
	require.NoError(t, err)
	assert.Equal(t, "b: by hand\n", string(got))
}

// TestConcurrentUpdatesShareBarriers: transactions that arrive while a
// batch is being applied are applied together, in two barriers, each its
// own commit with its own message, in turn order, and none loses another's
// read-modify-write.
func TestConcurrentUpdatesShareBarriers(t *testing.T) {
	env, _, _ := openUpdateHome(t)
	const n = 8
	// Every caller waits until all are staged: whichever applies first
	// then takes them all.
	gate := make(chan struct{})
	var staged atomic.Int32
	defer lifecycle.SetBeforeWait(func() {
		if staged.Add(1) == n {
			close(gate)
		}
		<-gate
	})()
	var c barrier.Counter
	defer barrier.SetCounter(barrier.SetCounter(&c))

	var wg sync.WaitGroup
	hashes := make([]string, n)
	for i := range n {
		wg.Go(func() {
			var err error
			hashes[i], err = env.Update(t.Context(), fmt.Sprintf("add %d", i), func(tx *lifecycle.Tx) error {
				b, err := tx.ReadFile("a.yaml")
				if err != nil {
					return err
				}
				return tx.WriteFile("a.yaml", append(b, fmt.Sprintf("k%d: %d\n", i, i)...))
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	// Each is answered after the first barrier and the renames; Apply
	// waits for the second, which makes the renames durable.
	require.NoError(t, env.Store.Apply())
	assert.Equal(t, int64(2), c.Barriers(), "one batch, two barriers")

	hist, err := env.Store.History("", n)
	require.NoError(t, err)
	require.Len(t, hist, n)
	seen := map[string]bool{}
	for i, h := range hist {
		assert.True(t, strings.HasPrefix(h.Message, "add "), h.Message)
		assert.False(t, seen[h.Message])
		seen[h.Message] = true
		assert.Contains(t, hashes, h.Hash, "commit %d is one a caller got", i)
	}
	final := readString(t, filepath.Join(env.ConfigDir, "a.yaml"))
	assert.Equal(t, n+1, strings.Count(final, "\n"), "no read-modify-write lost: %q", final)
	// Turn order is commit order: each commit holds one more line.
	for i, h := range hist {
		b, err := env.Store.ReadAt(h.Hash, "a.yaml")
		require.NoError(t, err)
		assert.Equal(t, n+1-i, strings.Count(string(b), "\n"))
	}
}

// TestUpdateBarriers: an Update of one file makes two barriers, the first
// of two fsyncs (the journal, the file's temporary file) and the second of
// one (its directory), counted through the hook every fsync of the module
// goes through. The Update is answered after the first and the rename;
// Apply waits for the second, so that the next Update's first barrier is
// not shared with it. MCPKEEP_UPDATES sets how many Updates (50 unless set);
// BENCHMARKS.md counts the same Updates' fsync system calls with strace:
//
//	go test -c -o /tmp/lifecycle.test ./lifecycle
//	MCPKEEP_UPDATES=300 strace -f -c -e trace=fsync,fdatasync /tmp/lifecycle.test -test.run '^TestUpdateBarriers$' -test.v
func TestUpdateBarriers(t *testing.T) {
	n := 50
	if v := os.Getenv("MCPKEEP_UPDATES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "MCPKEEP_UPDATES=%q: give a number of Updates", v)
	}
	env, _, _ := openUpdateHome(t)
	var c barrier.Counter
	defer barrier.SetCounter(barrier.SetCounter(&c))
	defer func() { t.Logf("%d Updates: %d barriers, %d fsyncs", n, c.Barriers(), c.Fsyncs()) }()
	for i := range n {
		_, err := env.Update(t.Context(), fmt.Sprint("set ", i), writeA(fmt.Sprint(i+1)))
		require.NoError(t, err)
		require.NoError(t, env.Store.Apply())
	}
	assert.Equal(t, int64(2*n), c.Barriers())
	assert.Equal(t, int64(3*n), c.Fsyncs())
}

// TestUpdatesRollbacksAndReadsAtOnce: a server's clients may update,
// roll back and read history at the same time (helios's stdio and HTTP
// sessions share one Env). Run with -race: the store must not be used by
// two goroutines at once, and every rollback must act on the commit its
// rev named when it began. The home ends committed and clean.
func TestUpdatesRollbacksAndReadsAtOnce(t *testing.T) {
	env, _, closeEnv := openUpdateHome(t)
	_, err := env.Update(t.Context(), "first", writeA("first"))
	require.NoError(t, err)
	require.NoError(t, closeEnv())
	// A packed repository, opened anew: go-git loads a pack's index on its
	// first use, from whichever goroutine gets there first.
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", env.ConfigDir, "gc", "-q").CombinedOutput()
	require.NoError(t, err, "%s", out)
	env, closeEnv, err = lifecycle.OpenHome(env.Home, nil)
	require.NoError(t, err)
	t.Cleanup(func() { closeEnv() })
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			_, err := env.Update(t.Context(), fmt.Sprintf("set %d", i), writeA(fmt.Sprint(i)))
			assert.NoError(t, err)
		})
		wg.Go(func() {
			_, err := env.Rollback(t.Context(), "HEAD~1")
			assert.NoError(t, err)
		})
		wg.Go(func() {
			for range 50 {
				_, err := env.Store.History("a.yaml", 0)
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	dirty, err := env.Store.Dirty()
	require.NoError(t, err)
	assert.False(t, dirty, "every change committed")
	require.NoError(t, closeEnv())

	lock, err := lifecycle.TryLock(env.Home)
	require.NoError(t, err)
	defer lock.Unlock()
	report, err := recovery.Run(t.Context(), recovery.Options{Home: env.Home})
	require.NoError(t, err)
	assert.True(t, report.Clean(), "%s", report)
	assert.Empty(t, gitCLI(t, env.ConfigDir, "status", "--porcelain"))
}

// TestUpdateOfAnotherHomeFromAFunction: a transaction's function may
// change another home; when that home's turn is held by another
// goroutine, the change waits for it (it is not ErrNested) and is made.
func TestUpdateOfAnotherHomeFromAFunction(t *testing.T) {
	a, _, _ := openUpdateHome(t)
	b, bFile, _ := openUpdateHome(t)
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		_, err := b.Update(t.Context(), "held", func(tx *lifecycle.Tx) error {
			close(holding)
			<-release
			return tx.WriteFile("d/b.yaml", []byte("b: held\n"))
		})
		held <- err
	}()
	<-holding
	_, err := a.Update(t.Context(), "outer", func(tx *lifecycle.Tx) error {
		if err := tx.WriteFile("a.yaml", []byte("a: outer\n")); err != nil {
			return err
		}
		// b's turn is held until release: the Update below waits for it
		// (the sleep only makes it likely that it finds the turn held).
		go func() { time.Sleep(50 * time.Millisecond); close(release) }()
		_, err := b.Update(t.Context(), "inner", writeA("inner"))
		return err
	})
	require.NoError(t, err)
	require.NoError(t, <-held)
	assert.Equal(t, "a: inner\n", readString(t, bFile))
}

// TestErrNestedWithOneEnv: in a process that uses one Env, which notes no
// goroutine id (envs), an Update from inside its function is still
// ErrNested, and one from a goroutine the function starts waits for the
// turn and is made. It runs in a child process, alone, to have one Env.
func TestErrNestedWithOneEnv(t *testing.T) {
	if os.Getenv("LIFECYCLE_ONE_ENV") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestErrNestedWithOneEnv$", "-test.v")
		cmd.Env = append(os.Environ(), "LIFECYCLE_ONE_ENV=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "--- PASS: TestErrNestedWithOneEnv")
		return
	}
	env, file, _ := openUpdateHome(t)
	var nested error
	other := make(chan error, 1)
	_, err := env.Update(t.Context(), "outer", func(tx *lifecycle.Tx) error {
		_, nested = env.Update(context.Background(), "inner", writeA("inner"))
		go func() {
			_, err := env.Update(context.Background(), "other", writeA("other"))
			other <- err
		}()
		return tx.WriteFile("a.yaml", []byte("a: outer\n"))
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), lifecycle.EnvsUsed(), "the process used one Env")
	require.ErrorIs(t, nested, lifecycle.ErrNested)
	require.NoError(t, <-other)
	assert.Equal(t, "a: other\n", readString(t, file), "the other goroutine's change came after the function's")
}

// TestUpdateRefusesWhatRecoveryQuarantines: a transaction of a server's
// Env refuses content the next start's recovery would quarantine (a file
// that does not parse, or one Options.Validate refuses), so the next start
// finds no corrupt file and commits nothing left behind.
func TestUpdateRefusesWhatRecoveryQuarantines(t *testing.T) {
	opts := options(t)
	opts.Validate = positiveA
	var env *lifecycle.Env
	opts.NewServer = func(e *lifecycle.Env) (*mcp.Server, error) {
		env = e
		return newServer(e)
	}
	r := run(t, opts)
	for name, fn := range map[string]func(*lifecycle.Tx) error{
		"does not parse": func(tx *lifecycle.Tx) error { return tx.WriteFile("bad.yaml", []byte("a: [\n")) },
		"Validate":       func(tx *lifecycle.Tx) error { return tx.WriteFile("a.yaml", []byte("a: -1\n")) },
	} {
		hash, err := env.Update(t.Context(), "m", fn)
		var ce *atomicfile.CorruptError
		require.ErrorAs(t, err, &ce, name)
		assert.Empty(t, hash, name)
	}
	_, err := env.Update(t.Context(), "good", func(tx *lifecycle.Tx) error { return tx.WriteFile("a.yaml", []byte("a: 1\n")) })
	require.NoError(t, err)
	require.NoError(t, r.stop(t))

	r = run(t, opts)
	assert.Empty(t, env.Report.Findings, "the next start finds nothing to repair")
	assert.Equal(t, "a: 1\n", readString(t, filepath.Join(env.ConfigDir, "a.yaml")))
	assert.Equal(t, "<none>", readString(t, filepath.Join(env.ConfigDir, "bad.yaml")))
	require.NoError(t, r.stop(t))
}
