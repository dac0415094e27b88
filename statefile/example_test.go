package statefile_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/statefile"
)

// A server writes its state file; another process reads it and checks the
// server is really running (not a recycled PID).
func ExampleRead() {
	home, _ := os.MkdirTemp("", "home")
	defer os.RemoveAll(home)
	path := filepath.Join(home, statefile.FileName)

	s, err := statefile.New("helios", home)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.HTTP = &statefile.HTTP{Host: "127.0.0.1", Port: 4242, URL: statefile.URL("localhost", 4242)}
	if err := statefile.Write(path, &s); err != nil {
		fmt.Println(err)
		return
	}
	got, err := statefile.Read(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.Name, got.HTTP.URL, got.Alive())
	// Output: helios http://127.0.0.1:4242/mcp true
}

// Servers register in one shared file; tools list the live ones.
func ExampleRegistry() {
	dir, _ := os.MkdirTemp("", "reg")
	defer os.RemoveAll(dir)
	reg := statefile.NewRegistry(filepath.Join(dir, "servers.json"))

	s, err := statefile.New("helios", "/home/me/.helios")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := reg.Register("/home/me/.helios", s); err != nil {
		fmt.Println(err)
		return
	}
	list, _ := reg.List()
	for _, e := range list {
		fmt.Println(e.ID, e.State.Name)
	}
	_ = reg.Unregister("/home/me/.helios")
	list, _ = reg.List()
	fmt.Println(len(list))
	// Output:
	// /home/me/.helios helios
	// 0
}

// URL never writes localhost, which may resolve to ::1 while the server
// listens on 127.0.0.1.
func ExampleURL() {
	fmt.Println(statefile.URL("localhost", 8080))
	fmt.Println(statefile.URL("0.0.0.0", 8080))
	// Output:
	// http://127.0.0.1:8080/mcp
	// http://127.0.0.1:8080/mcp
}
