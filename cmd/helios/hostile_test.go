package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// outsideMarker is planted in files outside the home that links in the
// config tree point to. No answer of helios, and nothing it logs, commits
// or moves into backups/, may ever hold it.
const outsideMarker = "OUTSIDE-THE-HOME-9c41e7"

// outsideFiles writes, in a directory of their own, a file that parses as
// a persona (so that a read through a link would return it whole) and one
// like /etc/shadow (so that a strict read's error would quote it), and
// returns the directory.
func outsideFiles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "evil.yaml"),
		[]byte("name: evil\npreferences:\n  secret: "+outsideMarker+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shadow"),
		[]byte("root:"+outsideMarker+":20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n"), 0o600))
	return dir
}

// aliasBomb is a billion-laughs persona: nine lists of nine aliases to the
// list before.
func aliasBomb() []byte {
	var b strings.Builder
	b.WriteString("name: bomb\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 9; i++ {
		r := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(r+", ", 8)+r)
	}
	b.WriteString("preferences: {tone: *a8}\n")
	return []byte(b.String())
}

// A hostileInput is something planted in config/personas/: the persona
// names it plants, and how.
type hostileInput struct {
	name    string
	persona []string                                     // the persona names it plants, personas/<name>.yaml
	kind    string                                       // the finding start-up recovery reports for each
	plant   func(t *testing.T, personas, outside string) // plants them
}

var hostileInputs = []hostileInput{
	{"link to a file outside the home", []string{"evil", "shadow"}, "refused-file", func(t *testing.T, dir, outside string) {
		require.NoError(t, os.Symlink(filepath.Join(outside, "evil.yaml"), filepath.Join(dir, "evil.yaml")))
		require.NoError(t, os.Symlink(filepath.Join(outside, "shadow"), filepath.Join(dir, "shadow.yaml")))
	}},
	{"link to a file inside the home", []string{"alias"}, "refused-file", func(t *testing.T, dir, _ string) {
		require.NoError(t, os.Symlink("default.yaml", filepath.Join(dir, "alias.yaml")))
	}},
	{"fifo", []string{"pipe"}, "refused-file", func(t *testing.T, dir, _ string) {
		require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o600))
	}},
	{"20 MiB file", []string{"big"}, "refused-file", func(t *testing.T, dir, _ string) {
		data := "name: big\npreferences:\n  tone: " + strings.Repeat("x", 20<<20) + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(data), 0o600))
	}},
	{"alias bomb", []string{"bomb"}, "corrupt-config", func(t *testing.T, dir, _ string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bomb.yaml"), aliasBomb(), 0o600))
	}},
}

// installedHome starts helios once on a fresh home and stops it, and
// returns the home: a template the tests copy.
func installedHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	s := start(t, home, filepath.Join(t.TempDir(), "servers.json"))
	s.ready(t)
	require.NoError(t, s.Stdin().Close())
	require.NoError(t, s.exit(t, hangAfter))
	return home
}

// copyHome copies the home at src to a new directory and returns it.
func copyHome(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "home")
	out, err := exec.Command("cp", "-a", src, dst).CombinedOutput()
	require.NoError(t, err, "cp: %s", out)
	return dst
}

// callEveryTool calls each of helios's tools, with the persona names given
// where a tool takes one, and returns every answer as the client got it:
// the text and the structured content, errors included.
func callEveryTool(t *testing.T, cs *mcp.ClientSession, names []string) []string {
	t.Helper()
	var calls []struct {
		tool string
		args map[string]any
	}
	add := func(tool string, args map[string]any) {
		calls = append(calls, struct {
			tool string
			args map[string]any
		}{tool, args})
	}
	for _, n := range names {
		add("get_persona", map[string]any{"name": n})
		add("set_active_persona", map[string]any{"name": n})
		add("update_preference", map[string]any{"persona": n, "key": "tone", "value": "dry"})
		add("history", map[string]any{"path": "personas/" + n + ".yaml"})
	}
	for _, tool := range []string{"get_config", "list_personas", "get_persona", "commit_changes", "history", "server_info"} {
		add(tool, nil)
	}
	add("rollback", map[string]any{"rev": "HEAD"})
	var answers []string
	for _, c := range calls {
		res := mcptest.CallTool(t, cs, c.tool, c.args)
		structured, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		answers = append(answers, fmt.Sprintf("%s(%v) error=%t: %s %s", c.tool, c.args, res.IsError, mcptest.Text(res), structured))
	}
	return answers
}

// findingsLogged reports whether log holds, for each persona name, a line
// saying the file was quarantined as kind, with its remedy.
func findingsLogged(log, kind string, personas []string) bool {
	for _, n := range personas {
		rel := "config/personas/" + n + ".yaml"
		logged := false
		for line := range strings.SplitSeq(log, "\n") {
			logged = logged || strings.Contains(line, "kind="+kind+" path="+rel+` action="quarantined to backups/`) &&
				strings.Contains(line, ` remedy="`)
		}
		if !logged {
			return false
		}
	}
	return true
}

// TestHostileConfigFiles plants, in config/personas/ of an installed home,
// each input of hostileInputs, and starts the built helios on it, stopping
// it by stdin EOF in one run and by SIGTERM in another. Start-up recovery
// quarantines each planted entry into backups/ with a finding (in
// server_info) and a remedy (in the log); every tool, called with the
// planted names before and after the same input is planted again while
// helios runs, answers without a byte of the files outside the home; the
// server keeps serving (an update of the default persona commits); it
// exits with status 0 and without hanging; the outside files are
// untouched, and no commit holds a mode 120000 entry or the outside bytes.
func TestHostileConfigFiles(t *testing.T) {
	template := installedHome(t)
	outside := outsideFiles(t)
	for _, in := range hostileInputs {
		for _, stop := range []string{"stdin EOF", "SIGTERM"} {
			t.Run(in.name+"/"+stop, func(t *testing.T) {
				home := copyHome(t, template)
				personas := filepath.Join(home, "config", "personas")
				in.plant(t, personas, outside)

				s := start(t, home, filepath.Join(t.TempDir(), "servers.json"))
				cs, stdout := teeStdio(t, s)
				s.ready(t)
				// The log is copied from a pipe by another goroutine: poll
				// for the findings rather than read it once.
				s.poll(t, "every finding logged with its remedy", func() bool {
					return findingsLogged(s.Stderr(), in.kind, in.persona)
				})
				info := mcptest.Call[struct{ Recovery []string }](t, cs, "server_info", nil)
				for _, n := range in.persona {
					rel := "config/personas/" + n + ".yaml"
					found := false
					for _, f := range info.Recovery {
						found = found || strings.HasPrefix(f, in.kind+" "+rel+": quarantined to backups/")
					}
					assert.True(t, found, "a %s finding for %s in %v", in.kind, rel, info.Recovery)
					_, err := os.Lstat(filepath.Join(personas, n+".yaml"))
					assert.ErrorIs(t, err, os.ErrNotExist, "%s is out of config/", rel)
				}

				answers := callEveryTool(t, cs, in.persona)
				// Planted again while helios runs: no start-up recovery
				// stands between it and the tools now.
				in.plant(t, personas, outside)
				answers = append(answers, callEveryTool(t, cs, in.persona)...)
				for _, a := range answers {
					assert.NotContains(t, a, outsideMarker)
					assert.NotContains(t, a, "daemon:*")
				}
				for _, n := range in.persona {
					// (The rollback tool removed it if a commit could be
					// made with it: it is not in HEAD.)
					if err := os.Remove(filepath.Join(personas, n+".yaml")); !os.IsNotExist(err) {
						require.NoError(t, err)
					}
				}
				changed := mcptest.Call[struct{ Commit string }](t, cs, "update_preference", map[string]any{"key": "tone", "value": "still serving"})
				assert.NotEmpty(t, changed.Commit, "the server keeps serving")

				began := time.Now()
				if stop == "SIGTERM" {
					require.NoError(t, syscall.Kill(s.Pid(), syscall.SIGTERM))
				} else {
					require.NoError(t, cs.Close())
				}
				lines := stdout()
				require.NoError(t, s.exit(t, hangAfter), "exit status 0")
				t.Logf("stopped %v after %s", time.Since(began).Round(time.Millisecond), stop)
				for _, line := range lines {
					require.NotContains(t, line, outsideMarker, "nothing helios wrote to stdout")
				}
				assert.NotContains(t, s.Stderr(), outsideMarker, "nor to its log")

				config := filepath.Join(home, "config")
				assert.NotContains(t, git(t, config, "ls-files", "-s"), "120000")
				assert.NotContains(t, git(t, config, "log", "--all", "--format=", "--raw"), "120000")
				assert.NotContains(t, git(t, config, "log", "--all", "-p"), outsideMarker)
				assert.Empty(t, git(t, config, "status", "--porcelain"))
				backups, err := exec.Command("grep", "-rl", "-D", "skip", outsideMarker, filepath.Join(home, "backups")).Output()
				assert.Empty(t, string(backups), "no copy of the outside bytes in backups/ (err %v)", err)
				b, err := os.ReadFile(filepath.Join(outside, "evil.yaml"))
				require.NoError(t, err)
				assert.Contains(t, string(b), outsideMarker, "the outside file is untouched")
				var p helios.Persona
				require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(personas, "default.yaml"), &p))
				assert.Equal(t, "still serving", p.Preferences["tone"])
			})
		}
	}
}

// TestRollbackToolRefusesALinkInHistory: a history that already holds a
// link to a file outside the home, made with the git CLI: helios's
// rollback tool to that commit is refused with an error naming the entry
// and the revision, the tree and HEAD are unchanged, and helios keeps
// serving.
func TestRollbackToolRefusesALinkInHistory(t *testing.T) {
	home := copyHome(t, installedHome(t))
	outside := outsideFiles(t)
	config := filepath.Join(home, "config")
	link := filepath.Join(config, "personas", "evil.yaml")
	require.NoError(t, os.Symlink(filepath.Join(outside, "evil.yaml"), link))
	git(t, config, "add", "-A")
	git(t, config, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a link, by hand")
	withLink := strings.TrimSpace(git(t, config, "rev-parse", "HEAD"))
	require.NoError(t, os.Remove(link))
	git(t, config, "add", "-A")
	git(t, config, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the link removed")
	head := git(t, config, "rev-parse", "HEAD")
	index := git(t, config, "ls-files", "-s")

	s := start(t, home, filepath.Join(t.TempDir(), "servers.json"))
	cs, _ := teeStdio(t, s)
	s.ready(t)
	res := mcptest.CallTool(t, cs, "rollback", map[string]any{"rev": withLink})
	require.True(t, res.IsError, mcptest.Text(res))
	assert.Contains(t, mcptest.Text(res), `"personas/evil.yaml" at `+withLink+` is a symbolic link: refused, nothing was written`)
	assert.NotContains(t, mcptest.Text(res), outsideMarker)
	assert.NotContains(t, mcptest.Text(res), outside, "the link's target is not quoted")
	assert.Equal(t, head, git(t, config, "rev-parse", "HEAD"), "no commit")
	assert.Equal(t, index, git(t, config, "ls-files", "-s"), "the tree unchanged")
	assert.Empty(t, git(t, config, "status", "--porcelain"))
	changed := mcptest.Call[struct{ Commit string }](t, cs, "update_preference", map[string]any{"key": "tone", "value": "after"})
	assert.NotEmpty(t, changed.Commit, "the server keeps serving")
	require.NoError(t, cs.Close())
	require.NoError(t, s.exit(t, hangAfter))
}
