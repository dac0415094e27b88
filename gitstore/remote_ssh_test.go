package gitstore_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/agent"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
)

// serveAgent serves an ssh agent holding key on a unix socket in a
// temporary directory, until the test ends, and returns the socket.
func serveAgent(t *testing.T, key any) string {
	t.Helper()
	keyring := agent.NewKeyring()
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: key}))
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return sock
}

// TestRemoteSSH pushes and fetches over ssh, authenticated by a key file
// (MCPKEEP_GIT_SSH_KEY's way) and by an ssh agent, against a server that
// checks both the key and, on the client's side, its host key.
func TestRemoteSSH(t *testing.T) {
	keyFile, priv, signer := gitremote.NewKey(t)
	srv := gitremote.ServeSSH(t, signer.PublicKey())
	t.Setenv("SSH_KNOWN_HOSTS", srv.KnownHosts(t))
	bare := gitremote.Bare(t)
	url := srv.URL(bare)

	a := home(t, map[string]string{"personas/default.yaml": "name: default\n"})
	ra := attach(t, a, url, &gitstore.RemoteOptions{Credentials: &gitstore.Credentials{SSHKeyFile: keyFile}})
	require.NoError(t, ra.Push(t.Context()))
	assert.Equal(t, head(t, a), strings.TrimSpace(gitremote.Run(t, bare, "rev-parse", "main")))

	// A second home, through the agent (no key file).
	t.Setenv("SSH_AUTH_SOCK", serveAgent(t, priv))
	b, rb := fetchClone(t, url, nil)
	assert.Equal(t, head(t, a), head(t, b))
	change(t, b, "b writes", map[string]string{"personas/b.yaml": "name: b\n"})
	require.NoError(t, rb.Push(t.Context()))
	in, err := ra.Fetch(t.Context())
	require.NoError(t, err)
	assert.Equal(t, gitstore.ActionFastForward, in.Action)
	assert.Equal(t, "name: b\n", readWork(t, a, "personas/b.yaml"))
	fsck(t, bare)

	// A key the server does not know: refused, saying how to give one.
	otherKey, _, _ := gitremote.NewKey(t)
	rc := attach(t, home(t, nil), url, &gitstore.RemoteOptions{Credentials: &gitstore.Credentials{SSHKeyFile: otherKey}})
	_, err = rc.Fetch(t.Context())
	require.ErrorIs(t, err, gitstore.ErrRemote)
	assert.Contains(t, err.Error(), gitstore.EnvGitSSHKey)

	// A server known_hosts does not list: refused.
	other := gitremote.ServeSSH(t, signer.PublicKey())
	t.Setenv("SSH_KNOWN_HOSTS", other.KnownHosts(t))
	_, err = ra.Fetch(t.Context())
	require.ErrorIs(t, err, gitstore.ErrRemote)
	assert.Contains(t, err.Error(), "host key is not in known_hosts")
	assert.Equal(t, head(t, b), head(t, a), "nothing fetched")
}
