package bootstrap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing/fstest"

	"github.com/mcpkeep/mcpkeep/bootstrap"
)

// The first Ensure installs the home; the next one only counts the boot.
func ExampleEnsure() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	spec := bootstrap.Spec{
		Home:     filepath.Join(dir, "home"),
		Schema:   1,
		Defaults: fstest.MapFS{"base.yaml": {Data: []byte("name: demo\n")}},
	}
	for range 2 {
		res, err := bootstrap.Ensure(context.Background(), spec)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Before.State, "->", res.After.State, "boots:", res.After.Boots)
	}
	// Output:
	// fresh -> ready boots: 1
	// ready -> ready boots: 2
}
