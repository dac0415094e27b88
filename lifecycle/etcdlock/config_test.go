package etcdlock_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfig(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, etcdlock.ConfigFile), []byte(`
endpoints: [https://10.0.0.1:2379, https://10.0.0.2:2379]
prefix: /teams/
name: helios-prod
ttl: 15s
cert: tls/client.pem
key: tls/client-key.pem
cacert: /etc/ssl/etcd-ca.pem
advertise: https://host-a.example:8443/mcp
`), 0o600))

	c, err := etcdlock.LoadConfig(home, env(nil))
	require.NoError(t, err)
	assert.Equal(t, etcdlock.Config{
		Endpoints: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"},
		Prefix:    "/teams/", Name: "helios-prod", TTL: 15 * time.Second,
		CertFile: filepath.Join(home, "tls/client.pem"), KeyFile: filepath.Join(home, "tls/client-key.pem"),
		CAFile: "/etc/ssl/etcd-ca.pem", Advertise: "https://host-a.example:8443/mcp",
	}, c)
	assert.True(t, c.Enabled())

	// The environment overrides the file, field by field.
	c, err = etcdlock.LoadConfig(home, env(map[string]string{
		etcdlock.EnvEndpoints: " http://127.0.0.1:2379 ,, http://127.0.0.1:22379",
		etcdlock.EnvTTL:       "3s",
		etcdlock.EnvCert:      "/c.pem",
		etcdlock.EnvAdvertise: "http://b:1/mcp",
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
	c, err := etcdlock.LoadConfig(t.TempDir(), env(nil))
	require.NoError(t, err)
	assert.False(t, c.Enabled())
	assert.Equal(t, etcdlock.Config{}, c)
}

func TestLoadConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
	}{
		"unknown field": {file: "endpoints: [a:1]\nendpoint: b:2\n"},
		"not yaml":      {file: "endpoints: [a:1\n"},
		"bad ttl env":   {env: map[string]string{etcdlock.EnvTTL: "ten"}},
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			if tc.file != "" {
				require.NoError(t, os.WriteFile(filepath.Join(home, etcdlock.ConfigFile), []byte(tc.file), 0o600))
			}
			_, err := etcdlock.LoadConfig(home, env(tc.env))
			require.Error(t, err)
			if tc.file != "" {
				var ce *atomicfile.CorruptError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, filepath.Join(home, etcdlock.ConfigFile), ce.Path)
			}
		})
	}
}

func TestNewChecksConfig(t *testing.T) {
	ok := etcdlock.Config{Endpoints: []string{"127.0.0.1:2379"}}
	for name, tc := range map[string]struct {
		c    etcdlock.Config
		name string
		msg  string
	}{
		"no endpoints":   {c: etcdlock.Config{}, name: "h", msg: "no endpoints"},
		"no port":        {c: etcdlock.Config{Endpoints: []string{"http://etcd.example"}}, name: "h", msg: "has no port"},
		"bad scheme":     {c: etcdlock.Config{Endpoints: []string{"unix://x:1"}}, name: "h", msg: "scheme"},
		"bad name":       {c: ok, name: "a/b", msg: `name "a/b"`},
		"empty name":     {c: ok, name: "", msg: `name ""`},
		"short ttl":      {c: etcdlock.Config{Endpoints: ok.Endpoints, TTL: 500 * time.Millisecond}, name: "h", msg: "whole seconds"},
		"fractional ttl": {c: etcdlock.Config{Endpoints: ok.Endpoints, TTL: 1500 * time.Millisecond}, name: "h", msg: "whole seconds"},
		"cert no key":    {c: etcdlock.Config{Endpoints: ok.Endpoints, CertFile: "c.pem"}, name: "h", msg: "both cert and key"},
		"missing tls files": {c: etcdlock.Config{Endpoints: ok.Endpoints, CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem"},
			name: "h", msg: "/nonexistent/c.pem"},
	} {
		t.Run(name, func(t *testing.T) {
			el, err := etcdlock.New(tc.c, tc.name, nil)
			if el != nil {
				el.Close()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}

	el, err := etcdlock.New(ok, "helios", nil)
	require.NoError(t, err, "New does not need etcd to be up")
	defer el.Close()
	assert.Equal(t, "/mcpkeep/helios/writer/", el.Key())
	assert.Equal(t, etcdlock.DefaultTTL, el.Config().TTL)
}
