package etcdconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock/etcdconfig"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfig(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, etcdconfig.ConfigFile), []byte(`
endpoints: [https://10.0.0.1:2379, https://10.0.0.2:2379]
prefix: /teams/
name: helios-prod
ttl: 15s
cert: tls/client.pem
key: tls/client-key.pem
cacert: /etc/ssl/etcd-ca.pem
advertise: https://host-a.example:8443/mcp
`), 0o600))

	c, err := etcdconfig.LoadConfig(home, env(nil))
	require.NoError(t, err)
	assert.Equal(t, etcdconfig.Config{
		Endpoints: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"},
		Prefix:    "/teams/", Name: "helios-prod", TTL: 15 * time.Second,
		CertFile: filepath.Join(home, "tls/client.pem"), KeyFile: filepath.Join(home, "tls/client-key.pem"),
		CAFile: "/etc/ssl/etcd-ca.pem", Advertise: "https://host-a.example:8443/mcp",
	}, c)
	assert.True(t, c.Enabled())

	// The environment overrides the file, field by field.
	c, err = etcdconfig.LoadConfig(home, env(map[string]string{
		etcdconfig.EnvEndpoints: " http://127.0.0.1:2379 ,, http://127.0.0.1:22379",
		etcdconfig.EnvTTL:       "3s",
		etcdconfig.EnvCert:      "/c.pem",
		etcdconfig.EnvAdvertise: "http://b:1/mcp",
	}))
	require.NoError(t, err)
	assert.Equal(t, []string{"http://127.0.0.1:2379", "http://127.0.0.1:22379"}, c.Endpoints)
	assert.Equal(t, 3*time.Second, c.TTL)
	assert.Equal(t, "/c.pem", c.CertFile)
	assert.Equal(t, filepath.Join(home, "tls/client-key.pem"), c.KeyFile)
	assert.Equal(t, "http://b:1/mcp", c.Advertise)
	assert.Equal(t, "helios-prod", c.Name)
}

func TestLoadConfigNone(t *testing.T) {
	c, err := etcdconfig.LoadConfig(t.TempDir(), env(nil))
	require.NoError(t, err)
	assert.False(t, c.Enabled())
	assert.Equal(t, etcdconfig.Config{}, c)
}

func TestLoadConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
	}{
		"unknown field": {file: "endpoints: [a:1]\nendpoint: b:2\n"},
		"not yaml":      {file: "endpoints: [a:1\n"},
		"bad ttl env":   {env: map[string]string{etcdconfig.EnvTTL: "ten"}},
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			if tc.file != "" {
				require.NoError(t, os.WriteFile(filepath.Join(home, etcdconfig.ConfigFile), []byte(tc.file), 0o600))
			}
			_, err := etcdconfig.LoadConfig(home, env(tc.env))
			require.Error(t, err)
			if tc.file != "" {
				var ce *atomicfile.CorruptError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, filepath.Join(home, etcdconfig.ConfigFile), ce.Path)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	c := etcdconfig.Config{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/p"}
	require.NoError(t, c.Check("helios"))
	assert.Equal(t, etcdconfig.Config{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/p/", Name: "helios", TTL: etcdconfig.DefaultTTL}, c)
	assert.False(t, c.Secure())
	c = etcdconfig.Config{Endpoints: []string{"127.0.0.1:2379"}, TTL: 1500 * time.Millisecond}
	require.ErrorContains(t, c.Check("helios"), "whole seconds")
	assert.True(t, (&etcdconfig.Config{Endpoints: []string{"https://10.0.0.1:2379"}}).Secure())
	assert.True(t, (&etcdconfig.Config{Endpoints: []string{"10.0.0.1:2379"}, CAFile: "ca.pem"}).Secure())
}

func TestCheckName(t *testing.T) {
	ok := []string{"h", "helios", "team-notes", "a.b_c-d", "0", strings.Repeat("x", 128)}
	bad := []string{"", "-a", ".a", "_a", "a/b", "a b", "é", strings.Repeat("x", 129), "a\n"}
	for _, name := range ok {
		c := etcdconfig.Config{Endpoints: []string{"127.0.0.1:2379"}, Name: name}
		assert.NoError(t, c.Check("h"), "%q", name)
	}
	for _, name := range bad {
		c := etcdconfig.Config{Endpoints: []string{"127.0.0.1:2379"}, Name: name}
		if name == "" {
			require.NoError(t, c.Check("h"), "empty takes the server's name")
			c = etcdconfig.Config{Endpoints: []string{"127.0.0.1:2379"}}
			assert.Error(t, c.Check(""), "and an empty server's name is refused")
			continue
		}
		assert.ErrorContains(t, c.Check("h"), "name", "%q", name)
	}
}
