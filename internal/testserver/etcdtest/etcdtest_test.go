package etcdtest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
)

func TestStartStopRestart(t *testing.T) {
	s := etcdtest.Start(t, nil)
	require.True(t, s.Running())
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+$`, s.URL)
	s.Stop()
	assert.False(t, s.Running())
	s.Stop() // stopping twice does nothing
	s.Restart()
	assert.True(t, s.Running())
}

func TestStartTLS(t *testing.T) {
	s := etcdtest.Start(t, &etcdtest.Options{TLS: true})
	assert.Regexp(t, `^https://127\.0\.0\.1:\d+$`, s.URL)
	for _, f := range []string{s.CertFile, s.KeyFile, s.CAFile} {
		assert.FileExists(t, f)
	}
}
