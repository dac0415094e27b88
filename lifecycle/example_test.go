package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
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

// A server on the harness: a home with one default file, one MCP server,
// stdio by default. Run blocks until the client goes away or a signal comes.
func ExampleHarness() {
	h, err := lifecycle.New(lifecycle.Options{
		Name: "notes", Home: filepath.Join(os.Getenv("HOME"), ".notes"),
		Spec: bootstrap.Spec{Schema: 1, Defaults: fstest.MapFS{"notes.yaml": {Data: []byte("notes: []\n")}}},
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) {
			s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0.1.0"}, nil)
			// add tools; change files only inside env.Update(ctx, msg, paths, write)
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
