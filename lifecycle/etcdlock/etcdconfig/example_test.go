package etcdconfig_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock/etcdconfig"
)

// A home's etcd.yaml, with one setting overridden from the environment:
// the settings a server would elect its writer with (etcdlock.New takes
// them, and the harness's Options.Elector the Elector it returns), read
// without linking the etcd client.
func ExampleLoadConfig() {
	home, err := os.MkdirTemp("", "home")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(home)
	yaml := "endpoints: [https://10.0.0.9:2379, https://10.0.0.10:2379]\n" +
		"name: team-notes\nttl: 10s\ncacert: etcd-ca.pem\n"
	if err := os.WriteFile(filepath.Join(home, etcdconfig.ConfigFile), []byte(yaml), 0o600); err != nil {
		panic(err)
	}
	environ := map[string]string{etcdconfig.EnvTTL: "5s"}
	cfg, err := etcdconfig.LoadConfig(home, func(k string) string { return environ[k] })
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Enabled(), cfg.Endpoints, cfg.Name, cfg.TTL)
	fmt.Println(cfg.CAFile == filepath.Join(home, "etcd-ca.pem"))
	// Output:
	// true [https://10.0.0.9:2379 https://10.0.0.10:2379] team-notes 5s
	// true
}
