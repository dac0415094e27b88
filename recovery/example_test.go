package recovery_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
