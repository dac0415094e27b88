package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// An update that began and never finished is rolled back at the next
// start; the report says so.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	home := filepath.Join(dir, "home")
	config := filepath.Join(home, "config")
	_ = os.MkdirAll(config, 0o700)
	_ = os.WriteFile(filepath.Join(config, "a.yaml"), []byte("v: 1\n"), 0o600)
	s, _ := gitstore.Init(config, nil)
	_, _ = s.Commit("install")
	s.Close()

	_, _ = recovery.Begin(home, "set v", "config/a.yaml")
	_ = os.WriteFile(filepath.Join(config, "a.yaml"), []byte("v: 2\n"), 0o600)
	// ... the process dies here, before Done.

	report, _ := recovery.Run(context.Background(), recovery.Options{Home: home})
	for _, f := range report.Findings {
		fmt.Println(f.Kind, f.Action)
	}
	b, _ := os.ReadFile(filepath.Join(config, "a.yaml"))
	fmt.Print(string(b))
	// Output:
	// interrupted-update rolled back config/a.yaml
	// missing-dir created
	// v: 1
}

// A server killed with SIGKILL leaves its state file behind. A program
// that takes the home's lock without starting a server (as
// lifecycle.OpenHome does) moves it aside, as a server's start would.
func ExampleMoveStaleState() {
	home, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(home)
	state := filepath.Join(home, "state.json")
	_ = os.WriteFile(state, []byte(`{"schema":1,"name":"helios","pid":999999,"start_time":1,"home":"`+home+
		`","stdio":true,"token":"7f3a9c0e5b2d4f6a8c1e3b5d7f9a2c4e","started_at":"2026-11-22T10:02:00Z","status":"ready"}`), 0o600)

	report, err := recovery.MoveStaleState(recovery.Options{Home: home})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range report.Findings {
		fmt.Println(f.Kind, f.Path)
	}
	_, err = os.Stat(state)
	fmt.Println("state file left:", err == nil)
	// Output:
	// stale-state state.json
	// state file left: false
}

// A program that writes config files checks each first, with the same
// Validate it gives Run, so that it writes nothing the next start would
// quarantine as corrupt.
func ExampleCheckConfig() {
	validate := func(rel string, data []byte) error {
		if rel == "limits.yaml" && !strings.Contains(string(data), "max:") {
			return fmt.Errorf("%s: max is missing", rel)
		}
		return nil
	}
	fmt.Println(recovery.CheckConfig("limits.yaml", []byte("max: 3\n"), validate))
	fmt.Println(recovery.CheckConfig("limits.yaml", []byte("min: 1\n"), validate))
	err := recovery.CheckConfig("notes.yaml", []byte("a: [\n"), validate)
	var ce *atomicfile.CorruptError
	fmt.Println(errors.As(err, &ce), ce.Path, ce.Line)
	// Output:
	// <nil>
	// limits.yaml: max is missing
	// true notes.yaml 1
}
