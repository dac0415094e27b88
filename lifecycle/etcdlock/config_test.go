package etcdlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle/etcdlock"
)

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
