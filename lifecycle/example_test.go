package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing/fstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/bootstrap"
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

// A change is a function the toolkit runs with a transaction: it reads and
// writes config files by paths relative to ConfigDir, and Update commits
// exactly those files, durably, or nothing at all. Here a notes tool adds a
// note file named after the notes it finds; no lock of its own is needed,
// since transactions take turns.
func ExampleEnv_Update() {
	home, _ := os.MkdirTemp("", "notes")
	defer os.RemoveAll(home)
	if _, err := bootstrap.Ensure(context.Background(), bootstrap.Spec{Home: home, Schema: 1,
		Defaults: fstest.MapFS{"notes/0.yaml": {Data: []byte("text: first\n")}}}); err != nil {
		fmt.Println(err)
		return
	}
	env, closeEnv, err := lifecycle.OpenHome(home, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeEnv()

	hash, err := env.Update(context.Background(), "add a note", func(tx *lifecycle.Tx) error {
		notes, err := tx.List("notes")
		if err != nil {
			return err
		}
		return tx.WriteYAML(fmt.Sprintf("notes/%d.yaml", len(notes)), map[string]string{"text": "second"})
	})
	fmt.Println(len(hash), err)

	_, err = env.Update(context.Background(), "escape", func(tx *lifecycle.Tx) error {
		return tx.WriteFile("../outside.yaml", []byte("x: 1\n"))
	})
	fmt.Println(errors.Is(err, lifecycle.ErrBadPath))

	history, _ := env.Store.History("", 0)
	for _, c := range history {
		fmt.Println(c.Message)
	}
	files, _ := env.Files()
	fmt.Println(files)
	// Output:
	// 40 <nil>
	// true
	// add a note
	// install: schema 1
	// [notes/0.yaml notes/1.yaml]
}

// A server on the harness: a home with one default file, one MCP server,
// stdio by default. Run blocks until the client goes away or a signal comes.
func ExampleHarness() {
	h, err := lifecycle.New(lifecycle.Options{
		Name: "notes", Home: filepath.Join(os.Getenv("HOME"), ".notes"),
		Spec: bootstrap.Spec{Schema: 1, Defaults: fstest.MapFS{"notes.yaml": {Data: []byte("notes: []\n")}}},
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) {
			s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0.1.0"}, nil)
			// add tools; change files only through env.Update(ctx, msg, func(tx *lifecycle.Tx) error {...})
			return s, nil
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err == nil {
		err = h.Run(context.Background())
	}
	if err != nil {
		slog.Error("notes", "err", err)
	}
}

// A server's whole main: Main runs the harness, logs to stderr and exits
// with a status a launcher can act on (0 after a clean stop, 1 on an
// error, 2 for Options it refuses, 3 on a home in use it cannot attach
// to). The server parses its own flags, if it has any, before it.
func ExampleMain() {
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	lifecycle.Main(lifecycle.Options{
		Name: "notes",
		Home: filepath.Join(home, ".notes"),
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) {
			s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0.1.0"}, nil)
			// add tools here
			return s, nil
		},
	})
}

// Warm builds what NewServer needs that does not come from the home while
// the harness locks, checks and recovers it: here the tools' schemas, which
// the go-sdk infers by reflection, go into a cache both servers share, so
// NewServer finds them made. Run does not wait for Warm; if NewServer comes
// first, it infers what the cache lacks itself.
func ExampleOptions_warm() {
	type noteArgs struct {
		Text string `json:"text"`
	}
	schemas := mcp.NewSchemaCache()
	build := func(env *lifecycle.Env) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0.1.0"}, &mcp.ServerOptions{SchemaCache: schemas})
		mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Add a note."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, any, error) {
				_, err := env.Update(ctx, "add a note", func(tx *lifecycle.Tx) error {
					notes, err := tx.List("notes")
					if err != nil {
						return err
					}
					return tx.WriteYAML(fmt.Sprintf("notes/%d.yaml", len(notes)), in)
				})
				return nil, nil, err
			})
		return s
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	lifecycle.Main(lifecycle.Options{
		Name:      "notes",
		Home:      filepath.Join(home, ".notes"),
		Warm:      func() { build(&lifecycle.Env{}) },
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) { return build(env), nil },
	})
}

// An operator tool checks that the path it was given is a home before it
// reads it, so a mistyped path is refused, with the path and the fix, and
// left as it was.
func ExampleCheckHome() {
	dir, _ := os.MkdirTemp("", "tool")
	defer os.RemoveAll(dir)
	home := filepath.Join(dir, "home")

	err := lifecycle.CheckHome(home)
	fmt.Println("missing:", errors.Is(err, lifecycle.ErrNotHome), errors.Is(err, fs.ErrNotExist))

	if _, err := bootstrap.Ensure(context.Background(), bootstrap.Spec{Home: home, Schema: 1}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("installed:", lifecycle.CheckHome(home))
	err = lifecycle.CheckHome(dir)
	fmt.Println("its parent:", errors.Is(err, lifecycle.ErrNotHome))
	// Output:
	// missing: true true
	// installed: <nil>
	// its parent: true
}
