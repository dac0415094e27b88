package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusesADirectoryThatIsNotAHome: helios given a directory of the
// user's, such as ~/Documents, exits with an error naming it and saying
// what to do, and writes nothing into it.
func TestRefusesADirectoryThatIsNotAHome(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Documents")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o600))
	cmd := exec.Command(heliosBin, "--home", dir, "--registry", "")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	require.Error(t, err)
	assert.Equal(t, exitUsage, cmd.ProcessState.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), dir)
	assert.Contains(t, stderr.String(), "notes.txt")
	assert.Contains(t, stderr.String(), "empty or new directory")
	assert.NotContains(t, stderr.String(), "installed a fresh home")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing written into %s", dir)
	assert.Equal(t, "notes.txt", entries[0].Name())
}

// TestNoHome: an empty home is a usage error that says which one is
// empty, --home or the default.
func TestNoHome(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"--home ''", []string{"--home", ""}, []string{"HOME=" + t.TempDir()},
			"helios: --home is empty: give the home directory, or leave --home out to use $HELIOS_HOME or ~/.helios\n"},
		{"--home= with HELIOS_HOME set", []string{"--home="}, []string{"HOME=" + t.TempDir(), "HELIOS_HOME=" + t.TempDir()},
			"helios: --home is empty: give the home directory, or leave --home out to use $HELIOS_HOME or ~/.helios\n"},
		{"no $HOME", nil, []string{"HOME="},
			"helios: no home: set --home or HELIOS_HOME (no $HOME to default to)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(heliosBin, append(tt.args, "--registry", "")...)
			cmd.Env = append(os.Environ(), append([]string{"HELIOS_HOME="}, tt.env...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.Error(t, cmd.Run())
			assert.Equal(t, exitUsage, cmd.ProcessState.ExitCode())
			assert.Equal(t, tt.want, stderr.String())
		})
	}
}

// TestTildeHome: a home written with ~, which an MCP client passes as it
// is, is a usage error naming where it came from and the full path, and
// nothing is made in the directory helios starts in.
func TestTildeHome(t *testing.T) {
	user := t.TempDir()
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"--home ~/x", []string{"--home", "~/x"}, nil,
			`helios: --home "~/x" starts with ~, which only a shell expands (an MCP client passes it as it is): give the full path, such as ` + filepath.Join(user, "x") + "\n"},
		{"HELIOS_HOME=~/.helios", nil, []string{"HELIOS_HOME=~/.helios"},
			`helios: HELIOS_HOME "~/.helios" starts with ~, which only a shell expands (an MCP client passes it as it is): give the full path, such as ` + filepath.Join(user, ".helios") + "\n"},
		{"--home ~", []string{"--home", "~"}, nil,
			`helios: --home "~" starts with ~, which only a shell expands (an MCP client passes it as it is): give the full path, such as ` + user + "\n"},
		{"--home ~bob/x", []string{"--home", "~bob/x"}, nil,
			`helios: --home "~bob/x" starts with ~, which only a shell expands (an MCP client passes it as it is): give the full path` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(heliosBin, append(tt.args, "--registry", "")...)
			cmd.Env = append(os.Environ(), append([]string{"HOME=" + user, "HELIOS_HOME="}, tt.env...)...)
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.Error(t, cmd.Run())
			assert.Equal(t, exitUsage, cmd.ProcessState.ExitCode())
			assert.Equal(t, tt.want, stderr.String())
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing made where helios started")
		})
	}
}

// TestHeliosHome: without --home, helios uses $HELIOS_HOME, then
// ~/.helios; --home wins over both, and a relative one is relative to the
// directory helios starts in.
func TestHeliosHome(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		heliosHome bool // set HELIOS_HOME
		want       string
	}{
		{"HELIOS_HOME", nil, true, "helios-home"},
		{"--home over HELIOS_HOME", []string{"--home", "{dir}/flag-home"}, true, "flag-home"},
		{"~/.helios", nil, false, "user/.helios"},
		{"a relative --home", []string{"--home", "rel-home"}, true, "rel-home"}, // relative to where helios starts
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"HOME=" + filepath.Join(dir, "user"), "HELIOS_HOME="}
			if tt.heliosHome {
				env = append(env, "HELIOS_HOME="+filepath.Join(dir, "helios-home"))
			}
			var args []string
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "{dir}", dir))
			}
			cmd := exec.Command(heliosBin, append(args, "--registry", "")...) // stdin at EOF: install, then stop
			cmd.Env = append(os.Environ(), env...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, home := range []string{"helios-home", "flag-home", "user/.helios", "rel-home"} {
				stamp := filepath.Join(dir, home, ".version")
				if home == tt.want {
					assert.FileExists(t, stamp, "installed in %s", home)
					assert.Contains(t, string(out), filepath.Join(dir, home), "logged")
				} else {
					assert.NoFileExists(t, stamp, "not installed in %s", home)
				}
			}
		})
	}
}

// TestHomeNotADirectory: a home that is a file, whose path goes through
// one, or that cannot be looked up at all (a symbolic link to itself), is
// refused in the terms of the flag or variable that gave it, before helios
// reads the home's etcd.yaml, whose error would hide it.
func TestHomeNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	require.NoError(t, os.WriteFile(file, []byte("mine\n"), 0o600))
	loop := filepath.Join(dir, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	rel := ` (` + file + `: relative to ` + dir + `, the directory the MCP client started helios in)`
	isFile := " is a file, not a directory: give the path of a directory (one that does not exist yet is created), or move the file away"
	inside := " is inside " + file + ", which is a file, not a directory: give the path of a directory, or move the file away"
	absolute := "; give it as an absolute path, the same from wherever a client starts helios"
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"--home FILE", []string{"--home", file}, nil, `helios: --home "` + file + `"` + isFile + "\n"},
		{"HELIOS_HOME=FILE", nil, []string{"HELIOS_HOME=" + file}, `helios: HELIOS_HOME "` + file + `"` + isFile + "\n"},
		{"--home FILE/x", []string{"--home", file + "/x"}, nil, `helios: --home "` + file + `/x"` + inside + "\n"},
		{"--home FILE/x/y", []string{"--home", file + "/x/y"}, nil, `helios: --home "` + file + `/x/y"` + inside + "\n"},
		{"a relative --home FILE", []string{"--home", "afile"}, nil, `helios: --home "afile"` + rel + isFile + absolute + "\n"},
		{"--home LOOP", []string{"--home", loop}, nil,
			`helios: --home "` + loop + `" cannot be used (stat ` + loop + ": too many levels of symbolic links): give another directory\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(heliosBin, append(tt.args, "--registry", "")...)
			cmd.Env = append(os.Environ(), append([]string{"HELIOS_HOME="}, tt.env...)...)
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.Error(t, cmd.Run())
			assert.Equal(t, exitUsage, cmd.ProcessState.ExitCode())
			assert.Equal(t, tt.want, stderr.String())
		})
	}
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "mine\n", string(data), "the file is left as it was")
}
