package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadFlag: a flag helios does not know, or one without its value, is
// one line on stderr naming it as it was typed, with where to look, and
// exit status 2: not the whole usage, which would bury it in the log of
// the MCP client that launched helios.
func TestBadFlag(t *testing.T) {
	const more = " (run helios --help for the flags)\n"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--hom", "x"}, "helios: flag provided but not defined: --hom" + more},
		{[]string{"-hom", "x"}, "helios: flag provided but not defined: -hom" + more},
		{[]string{"--hom=x"}, "helios: flag provided but not defined: --hom" + more},
		{[]string{"--home"}, "helios: flag needs an argument: --home" + more},
		{[]string{"--exclusive", "--home", "--exclusive", "--registry"}, "helios: flag needs an argument: --registry" + more},
		{[]string{"--http-max-sessions", "many"}, `helios: invalid value "many" for flag --http-max-sessions: parse error` + more},
		{[]string{"--exclusive=maybe"}, `helios: invalid boolean value "maybe" for --exclusive: parse error` + more},
		{[]string{"---home", "x"}, "helios: bad flag syntax: ---home" + more},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := exec.Command(heliosBin, tt.args...)
			cmd.Dir = t.TempDir()
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.Error(t, cmd.Run())
			assert.Equal(t, exitUsage, cmd.ProcessState.ExitCode())
			assert.Equal(t, tt.want, stderr.String())
			assert.Empty(t, stdout.String())
		})
	}
}

// TestHelp: --help and -h print the whole usage on stderr, every flag
// included, and exit 0.
func TestHelp(t *testing.T) {
	for _, flag := range []string{"--help", "-h", "-help"} {
		t.Run(flag, func(t *testing.T) {
			cmd := exec.Command(heliosBin, flag)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run())
			help := stderr.String()
			assert.True(t, strings.HasPrefix(help, "usage: helios [--home DIR]"), "%s", help)
			for _, f := range []string{"-home string", "-http-max-sessions int", "-exclusive\n", "-no-remote\n", "-etcd-cacert string"} {
				assert.True(t, strings.Contains(help, "\n  "+f), "--help lists %q", f)
			}
			assert.True(t, strings.HasSuffix(help, "which links the etcd client: the same server, the same process.\n"), "%s", help)
			assert.Empty(t, stdout.String())
		})
	}
}
