package etcdlock_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock"
)

// A server whose home is served from several hosts: the home's etcd.yaml
// (or the MCPKEEP_ETCD_* variables) names the cluster, and the Elector
// New returns goes into the harness's Options, which elects one writer
// among the hosts and closes the Elector when Run returns. A home whose
// settings name no cluster runs with no Elector, as a single host.
// etcdconfig's LoadConfig example shows the settings themselves.
func Example() {
	dir, err := os.UserHomeDir()
	if err != nil {
		slog.Error("find the home directory", "err", err)
		os.Exit(1)
	}
	home := filepath.Join(dir, ".notes")
	cfg, err := etcdlock.LoadConfig(home, nil)
	if err != nil {
		slog.Error("read the etcd settings", "err", err)
		os.Exit(1)
	}
	opts := lifecycle.Options{
		Name: "notes",
		Home: home,
		NewServer: func(env *lifecycle.Env) (*mcp.Server, error) {
			return mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v0.1.0"}, nil), nil
		},
	}
	if cfg.Enabled() {
		if opts.Elector, err = etcdlock.New(cfg, opts.Name, slog.Default()); err != nil {
			slog.Error("etcd", "err", err)
			os.Exit(1)
		}
	}
	lifecycle.Main(opts)
}

// New checks the settings before anything connects, and names what is
// wrong; with good ones it returns at once, even with etcd down: the
// client connects when the harness first campaigns.
func ExampleNew() {
	_, err := etcdlock.New(etcdlock.Config{Endpoints: []string{"10.0.0.9"}}, "notes", nil)
	fmt.Println(err)

	e, err := etcdlock.New(etcdlock.Config{Endpoints: []string{"http://127.0.0.1:1"}, TTL: 5 * time.Second}, "notes", nil)
	fmt.Println(err)
	fmt.Println(e.Close())
	// Output:
	// etcdlock: endpoint "10.0.0.9" has no port: give host:port or a URL such as https://10.0.0.1:2379
	// <nil>
	// <nil>
}
