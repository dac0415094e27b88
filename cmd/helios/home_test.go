package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
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

// unprivileged returns a helios binary and the credential to run it with
// so that file modes stop it: as the test's user, or as nobody, from a
// copy nobody may run, when the test runs as root.
func unprivileged(t *testing.T) (bin string, cred *syscall.Credential) {
	t.Helper()
	if os.Geteuid() != 0 {
		return heliosBin, nil
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	bin = filepath.Join(dir, "helios")
	data, err := os.ReadFile(heliosBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	return bin, &nobody
}

// readOnlyDir returns a new directory, in a directory the unprivileged
// helios may enter, that it may enter but not write into: root's, or the
// test user's with mode 0555.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(parent), 0o755))
	require.NoError(t, os.Chmod(parent, 0o755))
	dir := filepath.Join(parent, "ro")
	require.NoError(t, os.Mkdir(dir, 0o755))
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	return dir
}

// TestHomeCannotBeUsed: a home helios cannot create or reach, one among
// the user's files, or another server's, is refused naming --home or
// HELIOS_HOME as the user wrote it, and a relative one with the directory
// it was taken from; never with the harness's Go names (Options.Home,
// os.UserHomeDir()), which helios's user never set.
func TestHomeCannotBeUsed(t *testing.T) {
	bin, cred := unprivileged(t)
	ro := readOnlyDir(t)
	closed := filepath.Join(filepath.Dir(ro), "closed") // one it may not enter
	require.NoError(t, os.Mkdir(closed, 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(closed, "home"), 0o700))
	if cred == nil {
		require.NoError(t, os.Chmod(closed, 0o000))
		t.Cleanup(func() { os.Chmod(closed, 0o700) })
	}
	user := t.TempDir() // the user's home directory: ~/.helios is suggested
	require.NoError(t, os.Chmod(user, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(user, ".bashrc"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(user, "Documents"), 0o755))

	// Another server's home: a helios home whose stamp names notes.
	notes := filepath.Join(t.TempDir(), "notes")
	out, err := exec.Command(heliosBin, "--home", notes, "--registry", "").CombinedOutput()
	require.NoError(t, err, "%s", out)
	stamp := filepath.Join(notes, ".version")
	data, err := os.ReadFile(stamp)
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(data, &st))
	st["server"] = "notes"
	data, err = json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(stamp, data, 0o600))
	if cred != nil {
		require.NoError(t, filepath.Walk(filepath.Dir(notes), func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(cred.Uid), int(cred.Gid))
		}))
		require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(notes)), 0o755))
		require.NoError(t, os.Chown(user, int(cred.Uid), int(cred.Gid)))
	}

	suggest := ", such as " + filepath.Join(user, ".helios")
	tests := []struct {
		name string
		args []string
		env  []string
		dir  string // the directory helios starts in
		want string
	}{
		{"--home in a directory it cannot write", []string{"--home", filepath.Join(ro, "h")}, nil, "",
			`helios: --home "` + filepath.Join(ro, "h") + `" cannot be created (mkdir ` + filepath.Join(ro, "h") + ": permission denied): " +
				"give a directory this user can create" + suggest + ", or create it first, owned by the user helios runs as\n"},
		{"HELIOS_HOME in a directory it cannot write", nil, []string{"HELIOS_HOME=" + filepath.Join(ro, "a", "b")}, "",
			`helios: HELIOS_HOME "` + filepath.Join(ro, "a", "b") + `" cannot be created (mkdir ` + filepath.Join(ro, "a") + ": permission denied): " +
				"give a directory this user can create" + suggest + ", or create it first, owned by the user helios runs as\n"},
		{"a relative --home where it cannot write", []string{"--home", ".helios"}, nil, ro,
			`helios: --home ".helios" (` + filepath.Join(ro, ".helios") + ": relative to " + ro + ", the directory the MCP client started helios in) " +
				"cannot be created (mkdir " + filepath.Join(ro, ".helios") + ": permission denied): give a directory this user can create" + suggest +
				", or create it first, owned by the user helios runs as; give it as an absolute path, the same from wherever a client starts helios\n"},
		{"--home it cannot reach", []string{"--home", filepath.Join(closed, "home")}, nil, "",
			`helios: --home "` + filepath.Join(closed, "home") + `" cannot be reached (stat ` + filepath.Join(closed, "home") + ": permission denied): " +
				"give a directory this user may enter" + suggest + "\n"},
		{"--home $HOME", []string{"--home", user}, nil, "",
			`helios: --home "` + user + `" holds files that are not a home's (.bashrc, Documents), and no .version stamp: ` +
				"give an empty or new directory to install a new home" + suggest + ", or the directory of an existing home\n"},
		{"a relative HELIOS_HOME among other files", nil, []string{"HELIOS_HOME=."}, user,
			`helios: HELIOS_HOME "." (` + user + ": relative to " + user + ", the directory the MCP client started helios in) holds files that are not a home's " +
				"(.bashrc, Documents), and no .version stamp: give an empty or new directory to install a new home" + suggest +
				", or the directory of an existing home; give it as an absolute path, the same from wherever a client starts helios\n"},
		{"another server's home", []string{"--home", notes}, nil, "",
			`helios: --home "` + notes + `" is the home of the server "notes" (its .version says so), not of helios: give helios a home of its own` + suggest + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append(tt.args, "--registry", "")...)
			cmd.Env = append(os.Environ(), append([]string{"HOME=" + user, "HELIOS_HOME="}, tt.env...)...)
			cmd.Dir = cmp.Or(tt.dir, filepath.Dir(bin))
			if cred != nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.Error(t, cmd.Run())
			assert.Equal(t, exitUsage, cmd.ProcessState.ExitCode())
			assert.Equal(t, tt.want, stderr.String())
		})
	}
}

// TestRelativeHomeLogged: a relative home, which each client started in
// another directory makes another home, is said in one log line at start
// with the path it stands for; an absolute one is not.
func TestRelativeHomeLogged(t *testing.T) {
	const said = "is relative to the directory the MCP client started helios in: a client started in another directory uses another home"
	tests := []struct {
		name    string
		args    []string
		env     []string
		want    string // the line's message and attributes; "" for none
		wantDir string // the home, in the directory helios starts in
	}{
		{"--home rel", []string{"--home", "rel"}, nil, `msg="--home ` + said + `" home={dir}/rel given=rel wd={dir}`, "rel"},
		{"HELIOS_HOME a/b", nil, []string{"HELIOS_HOME=a/b"}, `msg="HELIOS_HOME ` + said + `" home={dir}/a/b given=a/b wd={dir}`, "a/b"},
		{"an absolute --home", []string{"--home", "{dir}/abs"}, nil, "", "abs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var args []string
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "{dir}", dir))
			}
			cmd := exec.Command(heliosBin, append(args, "--registry", "")...) // stdin at EOF: install, then stop
			cmd.Env = append(os.Environ(), append([]string{"HELIOS_HOME="}, tt.env...)...)
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Run(), stderr.String())
			assert.FileExists(t, filepath.Join(dir, tt.wantDir, ".version"))
			var lines []string
			for line := range strings.Lines(stderr.String()) {
				if strings.Contains(line, said) {
					lines = append(lines, line)
				}
			}
			if tt.want == "" {
				assert.Empty(t, lines)
				return
			}
			require.Len(t, lines, 1, stderr.String())
			assert.Contains(t, lines[0], " level=WARN "+strings.ReplaceAll(tt.want, "{dir}", dir)+"\n")
		})
	}
}

// TestHomeOfASocket: a directory whose only entry is another program's
// socket is no home, and the refusal names the socket (it named nothing:
// helios's list of a home's entries left every socket out).
func TestHomeOfASocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	mcptest.DeadSocket(t, filepath.Join(dir, "agent.sock"), false)
	cmd := exec.Command(heliosBin, "--home", dir, "--registry", "")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	assert.Equal(t, exitUsage, cmd.ProcessState.ExitCode())
	assert.Contains(t, stderr.String(), "holds files that are not a home's (agent.sock)")
}
