package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// modes are the two output forms of every command.
var modes = []struct {
	name string
	args []string
}{{"text", nil}, {"json", []string{"--json"}}}

func TestStatus(t *testing.T) {
	home := installed(t)
	head := history(t, home)[0].Hash
	t.Run("text", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", home)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "home:      "+home+"\n")
		assert.Contains(t, r.stdout, "installed: yes, schema 1")
		assert.Contains(t, r.stdout, "; 1 boot, last ")
		assert.Contains(t, r.stdout, "lock:      free\n")
		assert.Contains(t, r.stdout, "server:    none running\n")
		assert.Contains(t, r.stdout, "config:    HEAD "+head[:12]+", clean\n")
		assert.Empty(t, r.stderr)
	})
	t.Run("json", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", home, "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		got := decode[statusOut](t, r)
		assert.Equal(t, home, got.Home)
		assert.True(t, got.Installed)
		assert.Equal(t, "ready", got.State)
		assert.Equal(t, 1, got.Schema)
		assert.Equal(t, 1, got.Boots)
		assert.Nil(t, got.Lock)
		assert.Nil(t, got.Server)
		assert.Equal(t, &configOut{Head: head}, got.Config)
		assert.Empty(t, got.Problems)
	})
	t.Run("not installed", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", t.TempDir(), "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		got := decode[statusOut](t, r)
		assert.False(t, got.Installed)
		assert.Equal(t, "fresh", got.State)
		assert.Nil(t, got.Config)
	})
	t.Run("interrupted install", func(t *testing.T) {
		home := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(home, "config"), 0o700))
		r := mcpkeep(t, "status", "--home", home)
		require.Equal(t, exitOK, r.code, "not a problem: the next start finishes it; %s", r.stderr)
		assert.Contains(t, r.stdout, "installed: no (incomplete: no .version stamp: an install was interrupted)\n")
		got := decode[statusOut](t, mcpkeep(t, "status", "--home", home, "--json"))
		assert.Equal(t, "incomplete", got.State)
		assert.Equal(t, "no .version stamp: an install was interrupted", got.Detail)
	})
}

// TestStatusProblems: status exits 1 when it lists a problem, a file it
// cannot read or a failing health check of a live server, and still
// prints everything; a health check that passed is shown too.
func TestStatusProblems(t *testing.T) {
	home := installed(t)
	statePath := filepath.Join(home, statefile.FileName)
	live := func(health *statefile.Health) func(t *testing.T) {
		return func(t *testing.T) {
			st, err := statefile.New("helios", home) // this test process: alive
			require.NoError(t, err)
			st.Status, st.Health = statefile.StatusReady, health
			require.NoError(t, statefile.Write(statePath, &st))
		}
	}
	checked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		prepare  func(t *testing.T)
		code     int
		text     string // a line of the text output
		problems []string
	}{
		{"healthy", live(&statefile.Health{OK: true, CheckedAt: checked}), exitOK,
			"health:    ok (checked " + checked.Local().Format(time.DateTime) + ")\n", nil},
		{"not checked yet", live(nil), exitOK, "health:    not checked yet\n", nil},
		{"failing health", live(&statefile.Health{CheckedAt: checked, Problems: []string{"/x/config is not writable"}}), exitError,
			"health:    failing (checked " + checked.Local().Format(time.DateTime) + "): 1 problem(s)\n",
			[]string{"health check: /x/config is not writable"}},
		{"unreadable state file", func(t *testing.T) {
			require.NoError(t, os.WriteFile(statePath, []byte("{torn"), 0o600))
		}, exitError, "problem:   ", []string{statePath}},
	}
	for _, tt := range tests {
		for _, m := range modes {
			t.Run(tt.name+"/"+m.name, func(t *testing.T) {
				tt.prepare(t)
				t.Cleanup(func() { os.Remove(statePath) })
				r := mcpkeep(t, append([]string{"status", "--home", home}, m.args...)...)
				assert.Equal(t, tt.code, r.code, r.stderr)
				if tt.code == exitOK {
					assert.Empty(t, r.stderr)
				} else {
					assert.Equal(t, fmt.Sprintf("mcpkeep status: %d problem(s) found in %s, listed in the output\n", len(tt.problems), home), r.stderr)
				}
				if m.args == nil {
					assert.Contains(t, r.stdout, tt.text)
					return
				}
				got := decode[statusOut](t, r)
				require.Len(t, got.Problems, len(tt.problems))
				for i, p := range tt.problems {
					assert.Contains(t, got.Problems[i], p)
				}
			})
		}
	}
}

func TestServers(t *testing.T) {
	registry := filepath.Join(t.TempDir(), "servers.json")
	for _, m := range modes {
		t.Run("empty/"+m.name, func(t *testing.T) {
			r := mcpkeep(t, append([]string{"servers", "--registry", registry}, m.args...)...)
			require.Equal(t, exitOK, r.code, r.stderr)
			if m.args == nil {
				assert.Equal(t, "no live servers in "+registry+"\n", r.stdout)
			} else {
				got := decode[struct {
					Registry string       `json:"registry"`
					Servers  []*serverOut `json:"servers"`
				}](t, r)
				assert.Equal(t, registry, got.Registry)
				assert.NotNil(t, got.Servers)
				assert.Empty(t, got.Servers)
			}
		})
	}
	home := installed(t)
	p, st := live(t, home, registry)
	t.Run("text", func(t *testing.T) {
		r := mcpkeep(t, "servers", "--registry", registry)
		require.Equal(t, exitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 1)
		assert.Regexp(t, `^helios +pid `+strconv.Itoa(p.Pid())+` +ready +stdio\+`+st.HTTP.URL+` +`+home+`$`, lines[0])
	})
	t.Run("json", func(t *testing.T) {
		r := mcpkeep(t, "servers", "--registry", registry, "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		got := decode[struct{ Servers []*serverOut }](t, r)
		require.Len(t, got.Servers, 1)
		s := got.Servers[0]
		assert.Equal(t, p.Pid(), s.PID)
		assert.True(t, s.Alive)
		assert.Equal(t, st.HTTP.URL, s.URL)
		assert.Equal(t, home, s.Home)
	})
	t.Run("corrupt registry", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "servers.json")
		require.NoError(t, os.WriteFile(bad, []byte("{not json"), 0o600))
		r := mcpkeep(t, "servers", "--registry", bad)
		assert.Equal(t, exitError, r.code)
		assert.Contains(t, r.stderr, bad)
		assert.Empty(t, r.stdout)
	})
}

func TestDoctor(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		home := installed(t)
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				r := mcpkeep(t, append([]string{"doctor", "--home", home}, m.args...)...)
				require.Equal(t, exitOK, r.code, r.stderr)
				if m.args == nil {
					assert.Equal(t, "home "+home+": clean\n", r.stdout)
				} else {
					got := decode[recovery.Report](t, r)
					assert.Equal(t, home, got.Home)
					assert.True(t, got.DryRun)
					assert.Empty(t, got.Findings)
				}
			})
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				home := installed(t)
				path := filepath.Join(home, "config", "personas", "default.yaml")
				good, err := os.ReadFile(path)
				require.NoError(t, err)
				bad := []byte("name: [default\n")
				require.NoError(t, os.WriteFile(path, bad, 0o600))

				r := mcpkeep(t, append([]string{"doctor", "--home", home}, m.args...)...)
				assert.Equal(t, exitError, r.code, "problems found")
				assert.Contains(t, r.stderr, "doctor --fix")
				kinds := findings(t, m.args != nil, r)
				assert.Contains(t, kinds, recovery.KindCorruptConfig)
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, bad, data, "without --fix nothing changes")

				r = mcpkeep(t, append([]string{"doctor", "--home", home, "--fix"}, m.args...)...)
				require.Equal(t, exitOK, r.code, r.stderr)
				assert.Contains(t, findings(t, m.args != nil, r), recovery.KindCorruptConfig)
				data, err = os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, good, data, "restored from git")

				r = mcpkeep(t, "doctor", "--home", home)
				assert.Equal(t, exitOK, r.code, r.stdout)
			})
		}
	})
}

// TestDoctorStaleLock: a PID lock file naming a dead process (exited, or
// exited and not reaped), or no PID,
// is a finding: without --fix doctor reports it and changes nothing; with
// --fix it is reclaimed and reported.
func TestDoctorStaleLock(t *testing.T) {
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	for name, content := range map[string]string{
		"dead pid": strconv.Itoa(dead.Process.Pid) + "\n",
		// A killed writer whose parent has not waited for it yet: kill(pid,
		// 0) succeeds, but it holds nothing.
		"zombie pid": strconv.Itoa(mcptest.ZombiePID(t)) + "\n",
		"garbage":    "not a pid\n",
	} {
		for _, m := range modes {
			t.Run(name+"/"+m.name, func(t *testing.T) {
				home := installed(t)
				lockPath := filepath.Join(home, lifecycle.LockFile)
				require.NoError(t, os.WriteFile(lockPath, []byte(content), 0o600))

				r := mcpkeep(t, append([]string{"doctor", "--home", home}, m.args...)...)
				assert.Equal(t, exitError, r.code, "problems found")
				assert.Contains(t, r.stderr, "doctor --fix")
				assert.Equal(t, []string{"stale-lock"}, findings(t, m.args != nil, r))
				if m.args == nil {
					assert.Contains(t, r.stdout, "stale-lock .lock: would be reclaimed (")
				}
				data, err := os.ReadFile(lockPath)
				require.NoError(t, err)
				assert.Equal(t, content, string(data), "without --fix nothing changes")

				r = mcpkeep(t, append([]string{"doctor", "--home", home, "--fix"}, m.args...)...)
				require.Equal(t, exitOK, r.code, r.stderr)
				assert.Empty(t, r.stderr)
				assert.Equal(t, []string{"stale-lock"}, findings(t, m.args != nil, r))
				assert.NoFileExists(t, lockPath, "reclaimed, and released")

				r = mcpkeep(t, "doctor", "--home", home)
				assert.Equal(t, exitOK, r.code, r.stdout)
			})
		}
	}
}

// TestDoctorInterruptedInstall: a stamped home without its config
// repository is not something --fix can repair; doctor says to start the
// server, with or without --fix.
func TestDoctorInterruptedInstall(t *testing.T) {
	home := installed(t)
	require.NoError(t, os.RemoveAll(filepath.Join(home, "config")))
	for _, fix := range [][]string{nil, {"--fix"}} {
		for _, m := range modes {
			t.Run(strings.Join(append(fix, m.name), " "), func(t *testing.T) {
				r := mcpkeep(t, append(append([]string{"doctor", "--home", home}, fix...), m.args...)...)
				assert.Equal(t, exitError, r.code)
				assert.Contains(t, findings(t, m.args != nil, r), recovery.KindNotInstalled)
				assert.Contains(t, r.stderr, "start the server once")
				assert.NotContains(t, r.stderr, "--fix")
			})
		}
	}
}

// findings returns the kinds of finding a doctor run printed.
func findings(t *testing.T, isJSON bool, r result) []string {
	t.Helper()
	var kinds []string
	if isJSON {
		for _, f := range decode[recovery.Report](t, r).Findings {
			kinds = append(kinds, f.Kind)
		}
		return kinds
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, line := range lines[1:] { // the first line is the summary
		if strings.HasPrefix(line, "note: ") {
			continue // the notes follow the findings
		}
		kind, _, _ := strings.Cut(line, " ")
		kinds = append(kinds, kind)
	}
	return kinds
}

func TestHistory(t *testing.T) {
	home := installed(t)
	all := history(t, home)
	tests := []struct {
		name string
		args []string
		want []gitstore.Commit
	}{
		{"all", nil, all},
		{"one path", []string{"base.yaml"}, all[2:]},
		{"newest", []string{"-n", "1"}, all[:1]},
		{"flags after the path", []string{"personas/default.yaml", "-n", "2"}, all[:2]},
		{"a path never committed", []string{"personas/nobody.yaml"}, nil},
	}
	for _, tt := range tests {
		for _, m := range modes {
			t.Run(tt.name+"/"+m.name, func(t *testing.T) {
				args := append(append([]string{"history", "--home", home}, tt.args...), m.args...)
				r := mcpkeep(t, args...)
				require.Equal(t, exitOK, r.code, r.stderr)
				if m.args != nil {
					got := decode[struct{ Commits []gitstore.Commit }](t, r)
					require.Len(t, got.Commits, len(tt.want))
					for i, c := range tt.want {
						assert.Equal(t, c.Hash, got.Commits[i].Hash)
						assert.Equal(t, c.Message, got.Commits[i].Message)
					}
					return
				}
				if tt.want == nil {
					assert.Equal(t, "no commits: no commit of the config has ever held personas/nobody.yaml (paths are relative to "+
						filepath.Join(home, "config")+", such as base.yaml)\n", r.stdout)
					return
				}
				lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
				require.Len(t, lines, len(tt.want))
				for i, c := range tt.want {
					assert.True(t, strings.HasPrefix(lines[i], c.Hash[:12]+" "), lines[i])
					assert.True(t, strings.HasSuffix(lines[i], " "+firstLine(c.Message)), lines[i])
				}
			})
		}
	}
}

func TestRollback(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			home := installed(t)
			store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{ReadOnly: true})
			require.NoError(t, err)
			want, err := store.ReadAt("HEAD~2", "personas/default.yaml")
			require.NoError(t, err)
			store.Close()

			r := mcpkeep(t, append([]string{"rollback", "--home", home, "HEAD~2"}, m.args...)...)
			require.Equal(t, exitOK, r.code, r.stderr)
			commits := history(t, home)
			require.Len(t, commits, 4, "a new commit; history is kept")
			if m.args != nil {
				got := decode[map[string]string](t, r)
				assert.Equal(t, commits[0].Hash, got["commit"])
				assert.Equal(t, "HEAD~2", got["rev"])
				assert.Equal(t, home, got["home"])
			} else {
				assert.Equal(t, "config is now as at HEAD~2 (commit "+commits[0].Hash[:12]+")\n", r.stdout)
			}
			data, err := os.ReadFile(filepath.Join(home, "config", "personas", "default.yaml"))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(data))

			r = mcpkeep(t, append([]string{"rollback", "--home", home, "HEAD"}, m.args...)...)
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Len(t, history(t, home), 4, "nothing to roll back")
			if m.args == nil {
				assert.Equal(t, "config already equals HEAD; nothing committed\n", r.stdout)
			}

			r = mcpkeep(t, append([]string{"rollback", "--home", home, "nope"}, m.args...)...)
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, `"nope"`)
			failed(t, m.args != nil, r, `"nope"`)
		})
	}
}

// TestRollbackReportsRepairs: what rollback repairs on its way (a dead
// server's lock, a stale git lock) is part of its output, text or JSON,
// never log lines on stderr.
func TestRollbackReportsRepairs(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			home := installed(t)
			dead := exec.Command("true")
			require.NoError(t, dead.Run())
			lockPath := filepath.Join(home, lifecycle.LockFile)
			require.NoError(t, os.WriteFile(lockPath, []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(home, "config", ".git", "index.lock"), nil, 0o600))

			r := mcpkeep(t, append([]string{"rollback", "--home", home, "HEAD~1"}, m.args...)...)
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Empty(t, r.stderr, "no log lines")
			var notes []string
			if m.args != nil {
				notes = decode[struct{ Notes []string }](t, r).Notes
			} else {
				lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
				require.Len(t, lines, 3, r.stdout)
				assert.True(t, strings.HasPrefix(lines[2], "config is now as at HEAD~1"), lines[2])
				for _, l := range lines[:2] {
					note, ok := strings.CutPrefix(l, "note: ")
					assert.True(t, ok, l)
					notes = append(notes, note)
				}
			}
			require.Len(t, notes, 2, "%q", notes)
			assert.Regexp(t, `^reclaimed a stale lock: `+regexp.QuoteMeta(lockPath)+` named pid \d+, which is not running$`, notes[0])
			assert.Equal(t, "gitstore: repaired: removed stale .git/index.lock", notes[1])
		})
	}
}

// TestBadHome: every command that reads a home, given one that is not
// there, a ~ no shell expanded, not a directory or not a home, fails with exit 1 and one line that
// names the path, and writes nothing.
func TestBadHome(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	other := filepath.Join(dir, "documents")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "config"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o600))
	homes := []struct {
		name, path, says string
	}{
		{"missing", filepath.Join(dir, "missing"), "does not exist"},
		{"a ~ no shell expanded", "~/.helios", "only a shell expands"},
		{"a file", file, "not a directory"},
		{"an empty directory", empty, "not an installed home"},
		{"another directory", other, "not an installed home"},
	}
	commands := [][]string{{"doctor"}, {"doctor", "--fix"}, {"history"}, {"rollback", "HEAD"}, {"status"}}
	for _, h := range homes {
		for _, c := range commands {
			for _, m := range modes {
				if c[0] == "status" && h.path == empty {
					continue // status reports a home to be: TestStatus
				}
				t.Run(h.name+"/"+strings.Join(c, " ")+"/"+m.name, func(t *testing.T) {
					r := mcpkeep(t, append(append(c, "--home", h.path), m.args...)...)
					assert.Equal(t, exitError, r.code)
					failed(t, m.args != nil, r, h.says)
					assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
					assert.Contains(t, r.stderr, h.path)
					assert.Contains(t, r.stderr, h.says)
					assert.NoDirExists(t, filepath.Join(dir, "missing"), "no home created")
					for dir, n := range map[string]int{empty: 0, other: 2} {
						entries, err := os.ReadDir(dir)
						require.NoError(t, err)
						assert.Len(t, entries, n, "nothing written into %s, which is not a home", dir)
					}
				})
			}
		}
	}
}

func TestUsage(t *testing.T) {
	home := installed(t)
	tests := [][]string{
		{},
		{"frobnicate"},
		{"status", "--bogus"},
		{"status", "--home", home, "extra"},
		{"servers", "--registry", ""},
		{"doctor", "--home", home, "--fix=maybe"},
		{"history", "--home", home, "-n", "-1"},
		{"history", "--home", home, "-n", "many"},
		{"history", "--home", home, "a.yaml", "b.yaml"},
		{"rollback", "--home", home},
		{"rollback", "--home", home, "HEAD", "HEAD~1"},
		{"version", "extra"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := mcpkeep(t, args...)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.Empty(t, r.stdout)
			if len(args) > 1 {
				assert.Regexp(t, `^mcpkeep `+args[0]+`: [^\n]+ \(see mcpkeep `+args[0]+` --help\)\n$`, r.stderr, "one line")
			}
		})
	}
	assert.Len(t, history(t, home), 3, "no usage error wrote anything")
	for _, help := range [][]string{{"--help"}, {"help"}} {
		r := mcpkeep(t, help...)
		assert.Equal(t, exitOK, r.code, "%v", help)
		assert.Contains(t, r.stderr, "usage: mcpkeep COMMAND", "%v", help)
	}
	for cmd, synopsis := range map[string]string{
		"status":   "usage: mcpkeep status [--home DIR] [--json]\n",
		"servers":  "usage: mcpkeep servers [--registry FILE] [--json]\n",
		"doctor":   "usage: mcpkeep doctor [--home DIR] [--fix] [--json]\n",
		"history":  "usage: mcpkeep history [--home DIR] [PATH] [-n N] [--json]\n",
		"rollback": "usage: mcpkeep rollback [--home DIR] REV [--json]\n",
		"version":  "usage: mcpkeep version [--json]\n",
	} {
		r := mcpkeep(t, cmd, "--help")
		assert.Equal(t, exitOK, r.code, cmd)
		assert.Empty(t, r.stdout)
		assert.True(t, strings.HasPrefix(r.stderr, synopsis), "%s --help: %s", cmd, r.stderr)
		assert.Equal(t, 1, strings.Count(r.stderr, "usage:"), "printed once: %s", r.stderr)
	}
}

// TestVersion: --version and version print "mcpkeep <version>" to stdout,
// as helios --version does.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		r := mcpkeep(t, args...)
		assert.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		assert.Regexp(t, `^mcpkeep \S+( \(.+\))?\n$`, r.stdout, "%v", args)
		assert.Empty(t, r.stderr, "%v", args)
	}
	got := decode[map[string]string](t, mcpkeep(t, "version", "--json"))
	assert.Equal(t, "mcpkeep", got["name"])
	assert.NotEmpty(t, got["version"])
	assert.Contains(t, got, "commit")
	assert.NotEmpty(t, got["detail"], "a test build is no release: the detail says where it came from")
}

// TestLiveServer: beside a running server, doctor --fix and rollback refuse
// with exit 3 naming it, and no command prints its token, neither while it
// runs nor after it was SIGKILLed and left its state file behind.
func TestLiveServer(t *testing.T) {
	home := installed(t)
	registry := filepath.Join(t.TempDir(), "servers.json")
	p, st := live(t, home, registry)
	before := history(t, home)

	t.Run("status", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", home)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "lock:      held by pid "+strconv.Itoa(p.Pid())+" (running)\n")
		counted := regexp.MustCompile(` http=` + regexp.QuoteMeta(st.HTTP.URL) +
			` \(0 sessions, 0 connections as of the last health check, ([0-9: -]+); /healthz has them live\)\n`).FindStringSubmatch(r.stdout)
		checked := regexp.MustCompile(`health:    ok \(checked ([0-9: -]+)\)\n`).FindStringSubmatch(r.stdout)
		require.Len(t, counted, 2, "the counts say when they were taken:\n%s", r.stdout)
		require.Len(t, checked, 2, "the first check runs at start:\n%s", r.stdout)
		assert.Equal(t, checked[1], counted[1], "the counts are the last health check's")
		got := decode[statusOut](t, mcpkeep(t, "status", "--home", home, "--json"))
		require.NotNil(t, got.Server)
		assert.Equal(t, &lockOut{PID: p.Pid(), Alive: true}, got.Lock)
		assert.Equal(t, p.Pid(), got.Server.PID)
		assert.True(t, got.Server.Alive)
		assert.Equal(t, st.HTTP.URL, got.Server.URL)
		if assert.NotNil(t, got.Server.HTTPSessions) && assert.NotNil(t, got.Server.HTTPConnections) {
			assert.Zero(t, *got.Server.HTTPSessions, "the counts of the first check, before any client")
			assert.Zero(t, *got.Server.HTTPConnections)
		}
	})
	t.Run("doctor beside it", func(t *testing.T) {
		r := mcpkeep(t, "doctor", "--home", home)
		assert.Equal(t, exitOK, r.code, r.stderr)
		assert.Equal(t, "home "+home+": clean\n", r.stdout, "a live server's files are not findings")
	})

	for _, c := range []struct {
		args   []string
		remedy string
	}{
		{[]string{"doctor", "--fix"}, "; stop that server first: doctor --fix does not write beside a live server\n"},
		{[]string{"rollback", "HEAD~1"}, "; stop that server first: rollback does not write beside a live server\n"},
	} {
		for _, m := range modes {
			t.Run(strings.Join(c.args, " ")+"/"+m.name, func(t *testing.T) {
				r := mcpkeep(t, append(append(c.args, "--home", home), m.args...)...)
				assert.Equal(t, exitInUse, r.code, r.stderr)
				assert.Contains(t, r.stderr, "pid "+strconv.Itoa(p.Pid()))
				assert.Contains(t, r.stderr, st.HTTP.URL)
				assert.True(t, strings.HasSuffix(r.stderr, c.remedy), "one remedy, for this command: %s", r.stderr)
				assert.Equal(t, 1, strings.Count(r.stderr, ";"), "one remedy: %s", r.stderr)
				if got := failed(t, m.args != nil, r, c.remedy[2:len(c.remedy)-1]); m.args != nil {
					assert.Equal(t, home, got.Home)
				}
			})
		}
	}
	assert.Equal(t, before, history(t, home), "nothing written beside the server")

	all := [][]string{{"status", "--home", home}, {"servers", "--registry", registry}, {"doctor", "--home", home},
		{"history", "--home", home}, {"rollback", "--home", home, "HEAD~1"}, {"doctor", "--home", home, "--fix"}}
	noToken := func(t *testing.T) {
		for _, c := range all {
			for _, m := range modes {
				r := mcpkeep(t, append(c, m.args...)...)
				assert.NotContains(t, r.stdout+r.stderr, st.Token, "%v %v", c, m.args)
			}
		}
	}
	t.Run("no token while it runs", noToken)
	require.NoError(t, p.Kill())
	t.Run("stale", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", home)
		assert.Equal(t, exitError, r.code, "a dead server's state file is a problem: %s", r.stderr)
		assert.Contains(t, r.stdout, "lock:      stale, pid "+strconv.Itoa(p.Pid())+" is not running")
		assert.Contains(t, r.stdout, "not running: stale state file")
		assert.Contains(t, r.stdout, "health:    unknown: the server is not running (its last check passed, at ")
		assert.False(t, decode[statusOut](t, mcpkeep(t, "status", "--home", home, "--json")).Server.Alive)
		// doctor calls the lock and the socket stale too, and changes nothing.
		r = mcpkeep(t, "doctor", "--home", home, "--json")
		assert.Equal(t, exitError, r.code, r.stderr)
		assert.Equal(t, []string{"stale-lock", "stale-socket", recovery.KindStaleState}, findings(t, true, r))
		assert.Equal(t, "mcp.sock", decode[recovery.Report](t, r).Findings[1].Path)
		_, err := os.Lstat(filepath.Join(home, "mcp.sock"))
		assert.NoError(t, err)
		data, err := os.ReadFile(filepath.Join(home, lifecycle.LockFile))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(p.Pid()), strings.TrimSpace(string(data)))
		assert.FileExists(t, filepath.Join(home, "state.json"))
	})
	t.Run("no token from a stale state file", noToken)
}

// TestStatusAttached: status shows the writer, its own client and each
// session attached to it (pid, client, since), text and JSON; servers
// counts the attached ones.
func TestStatusAttached(t *testing.T) {
	home := installed(t)
	registry := filepath.Join(t.TempDir(), "servers.json")
	writer, st := live(t, home, registry)
	const own = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},` +
		`"clientInfo":{"name":"claude-code","version":"1.2.3"}}}` + "\n" + mcptest.Initialized + "\n"
	_, err := io.WriteString(writer.Stdin(), own)
	require.NoError(t, err)
	second, err := crashtest.Start(t.Context(), crashtest.Cmd{Path: heliosBin, Args: []string{"--home", home, "--registry", registry}})
	require.NoError(t, err)
	t.Cleanup(func() {
		second.Kill()
		second.Wait()
	})
	_, err = io.WriteString(second.Stdin(), mcptest.Handshake)
	require.NoError(t, err)

	var got statusOut
	deadline := time.Now().Add(hangAfter)
	for got.Server == nil || len(got.Server.Sessions) == 0 || got.Server.Sessions[0].Client == "" || got.Server.Client == nil {
		require.False(t, time.Now().After(deadline), "no own client and named attached session in status after %v; stderr:\n%s\n%s",
			hangAfter, writer.Stderr(), second.Stderr())
		time.Sleep(10 * time.Millisecond)
		got = decode[statusOut](t, mcpkeep(t, "status", "--home", home, "--json"))
	}
	assert.Equal(t, writer.Pid(), got.Server.PID, "the server is the writer")
	assert.Equal(t, filepath.Join(home, "mcp.sock"), got.Server.Socket)
	assert.Equal(t, 1, got.Server.Attached)
	require.Len(t, got.Server.Sessions, 1)
	a := got.Server.Sessions[0]
	assert.Equal(t, second.Pid(), a.PID)
	assert.Equal(t, "test", a.Client)
	assert.Equal(t, "v0", a.ClientVersion)
	assert.WithinDuration(t, time.Now(), a.Since, hangAfter)
	c := got.Server.Client
	assert.Equal(t, "claude-code", c.Name)
	assert.Equal(t, "1.2.3", c.Version)
	assert.WithinDuration(t, time.Now(), c.Since, hangAfter)

	r := mcpkeep(t, "status", "--home", home)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, " socket="+filepath.Join(home, "mcp.sock")+" http=")
	assert.Contains(t, r.stdout, fmt.Sprintf("client:    claude-code 1.2.3 (stdio, since %s)\n", c.Since.Local().Format(time.DateTime)))
	assert.Contains(t, r.stdout, fmt.Sprintf("attached:  pid %d, test v0, since %s\n", second.Pid(), a.Since.Local().Format(time.DateTime)))

	r = mcpkeep(t, "servers", "--registry", registry)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, st.HTTP.URL+" +1 attached  "+home)
	servers := decode[struct {
		Servers []serverOut `json:"servers"`
	}](t, mcpkeep(t, "servers", "--registry", registry, "--json"))
	require.Len(t, servers.Servers, 1)
	assert.Equal(t, 1, servers.Servers[0].Attached)
}

// TestStatusStaleServer: the state file of a server that is not running
// (SIGKILLed with its attached processes) is a problem, exit 1; status
// shows its last health check, clients and role as that file's, not as
// live, text and JSON.
func TestStatusStaleServer(t *testing.T) {
	home := installed(t)
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	pid := dead.Process.Pid
	checked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := checked.Add(time.Minute)
	st, err := statefile.New("helios", home)
	require.NoError(t, err)
	st.PID, st.Version, st.Status, st.Stdio, st.Socket = pid, "1.0", statefile.StatusReady, true, filepath.Join(home, "mcp.sock")
	st.HTTP = &statefile.HTTP{Port: 1, URL: "http://127.0.0.1:1/mcp", Sessions: 2, Connections: 3}
	st.Health = &statefile.Health{OK: true, CheckedAt: checked}
	st.Client = &statefile.Client{Name: "claude-code", Version: "1.2.3", Since: since}
	st.Sessions = []statefile.Session{{PID: pid, Client: "cursor", ClientVersion: "0.9", Since: since}}
	st.Cluster = &statefile.Cluster{Role: statefile.RoleActive, Term: 7, Since: since}
	require.NoError(t, statefile.Write(filepath.Join(home, statefile.FileName), &st))
	require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(pid)+"\n"), 0o600))
	problem := fmt.Sprintf("the server the state file names, pid %d, is not running", pid)
	stderr := fmt.Sprintf("mcpkeep status: 2 problem(s) found in %s, listed in the output\n", home) // the lock's and the state file's

	t.Run("text", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", home)
		assert.Equal(t, exitError, r.code, "a stale state file is no running server")
		assert.Equal(t, stderr, r.stderr)
		at := func(tm time.Time) string { return tm.Local().Format(time.DateTime) }
		for _, want := range []string{
			fmt.Sprintf("server:    helios 1.0, pid %d, ready (not running: stale state file), started ", pid),
			"transport: stdio=true socket=" + st.Socket + " http=" + st.HTTP.URL + "\n",
			"role:      none: the server is not running (the stale state file says: active writer (term 7) since " + at(since) + ")\n",
			"client:    none live (the stale state file names claude-code 1.2.3, stdio, since " + at(since) + ")\n",
			"attached:  none live; the stale state file lists 1 session:\n" +
				fmt.Sprintf("           pid %d, cursor 0.9, since %s\n", pid, at(since)),
			"health:    unknown: the server is not running (its last check passed, at " + at(checked) + ")\n",
			"problem:   " + problem,
		} {
			assert.Contains(t, r.stdout, want)
		}
		assert.NotContains(t, r.stdout, "health:    ok")
		assert.NotContains(t, r.stdout, "/healthz", "no live counts to point to")
	})
	t.Run("json", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", home, "--json")
		assert.Equal(t, exitError, r.code)
		assert.Equal(t, stderr, r.stderr)
		got := decode[statusOut](t, r)
		require.Len(t, got.Problems, 2)
		assert.Equal(t, staleLockProblem(pid), got.Problems[0])
		assert.Contains(t, got.Problems[1], problem)
		s := got.Server
		require.NotNil(t, s)
		assert.False(t, s.Alive)
		assert.Equal(t, pid, s.PID)
		assert.Nil(t, s.Health, "not the live health")
		assert.Nil(t, s.Client)
		assert.Zero(t, s.Attached)
		assert.Empty(t, s.Sessions, "no stale session listed as live")
		assert.Nil(t, s.HTTPSessions)
		assert.Nil(t, s.Cluster)
		require.NotNil(t, s.Stale, "the state file's last records, as such")
		assert.Equal(t, st.Health, s.Stale.Health)
		assert.Equal(t, &clientOut{Name: "claude-code", Version: "1.2.3", Since: since}, s.Stale.Client)
		assert.Equal(t, 1, s.Stale.Attached)
		assert.Equal(t, []sessionOut{{PID: pid, Client: "cursor", ClientVersion: "0.9", Since: since}}, s.Stale.Sessions)
		if assert.NotNil(t, s.Stale.HTTPSessions) && assert.NotNil(t, s.Stale.HTTPConnections) {
			assert.Equal(t, 2, *s.Stale.HTTPSessions)
			assert.Equal(t, 3, *s.Stale.HTTPConnections)
		}
		assert.Equal(t, st.Cluster, s.Stale.Cluster)
		assert.Equal(t, &lockOut{PID: pid}, got.Lock)
	})
}

// TestStatusStaleLock: a PID lock file naming a server that is not
// running (exited, or exited and not reaped) is a problem, exit 1, with
// or without a state file left beside it, as a stale state file is one
// and as doctor calls it stale-lock; the text's problem lines are the
// JSON's problems. A lock held by a running process is none.
func TestStatusStaleLock(t *testing.T) {
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	zombie := mcptest.ZombiePID(t)
	self := os.Getpid()
	stateProblem := func(pid int) string {
		return fmt.Sprintf("the server the state file names, pid %d, is not running: ", pid)
	}
	for _, tc := range []struct {
		name     string
		lock     int  // the pid in the PID lock file
		state    bool // a state file names lock's pid
		alive    bool
		problems []string // each a problem's start, in order
	}{
		{"dead pid", dead.Process.Pid, false, false, []string{staleLockProblem(dead.Process.Pid)}},
		{"zombie pid", zombie, false, false, []string{staleLockProblem(zombie)}},
		{"dead pid and its state file", dead.Process.Pid, true, false,
			[]string{staleLockProblem(dead.Process.Pid), stateProblem(dead.Process.Pid)}},
		{"held", self, false, true, nil},
		{"held, with its state file", self, true, true, nil},
	} {
		for _, m := range modes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				home := installed(t)
				require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(tc.lock)+"\n"), 0o600))
				if tc.state {
					st, err := statefile.New("helios", home) // this test process, with its start time
					require.NoError(t, err)
					st.PID, st.Status = tc.lock, statefile.StatusReady
					require.NoError(t, statefile.Write(filepath.Join(home, statefile.FileName), &st))
				}

				r := mcpkeep(t, append([]string{"status", "--home", home}, m.args...)...)
				if tc.problems == nil {
					assert.Equal(t, exitOK, r.code, r.stdout)
					assert.Empty(t, r.stderr)
				} else {
					assert.Equal(t, exitError, r.code, r.stdout)
					assert.Equal(t, fmt.Sprintf("mcpkeep status: %d problem(s) found in %s, listed in the output\n", len(tc.problems), home), r.stderr)
				}
				got := statusProblems(t, m.args != nil, r)
				require.Len(t, got, len(tc.problems), "%q", got)
				for i, p := range tc.problems {
					assert.True(t, strings.HasPrefix(got[i], p), "problem %d: %q, want %q...", i, got[i], p)
				}
				if m.args == nil {
					line := fmt.Sprintf("lock:      stale, pid %d is not running (the next start reclaims it)\n", tc.lock)
					if tc.alive {
						line = fmt.Sprintf("lock:      held by pid %d (running)\n", tc.lock)
					}
					assert.Contains(t, r.stdout, line)
				} else {
					assert.Equal(t, &lockOut{PID: tc.lock, Alive: tc.alive}, decode[statusOut](t, r).Lock)
				}
			})
		}
	}
}

// statusProblems returns the problems a status run printed: its
// "problem:" lines, or with --json (isJSON) its problems.
func statusProblems(t *testing.T, isJSON bool, r result) []string {
	t.Helper()
	if isJSON {
		return decode[statusOut](t, r).Problems
	}
	var problems []string
	for line := range strings.Lines(r.stdout) {
		if p, ok := strings.CutPrefix(line, "problem:   "); ok {
			problems = append(problems, strings.TrimSuffix(p, "\n"))
		}
	}
	return problems
}

// TestDoctorStaleSocket: the sockets a writer that is not running left,
// in the home and at the path outside it its state file names, and a
// temporary one left alone, are findings: without --fix doctor reports
// them and changes nothing; with --fix they are removed and reported. A
// socket something listens on is neither.
func TestDoctorStaleSocket(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			home := installed(t)
			inside := filepath.Join(home, "mcp.sock")
			outside := filepath.Join(t.TempDir(), "0123456789abcdef.sock")
			dead := exec.Command("true")
			require.NoError(t, dead.Run())
			require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o600))
			st, err := statefile.New("helios", home)
			require.NoError(t, err)
			st.PID, st.Status, st.Socket = dead.Process.Pid, statefile.StatusReady, outside
			require.NoError(t, statefile.Write(filepath.Join(home, statefile.FileName), &st))
			mcptest.DeadSocket(t, inside, false)
			mcptest.DeadSocket(t, outside, false)
			want := []string{"stale-lock", "stale-socket", "stale-socket", recovery.KindStaleState}

			r := mcpkeep(t, append([]string{"doctor", "--home", home}, m.args...)...)
			assert.Equal(t, exitError, r.code, "problems found")
			assert.Contains(t, r.stderr, "doctor --fix")
			assert.Equal(t, want, findings(t, m.args != nil, r))
			if m.args == nil {
				assert.Contains(t, r.stdout, "\nstale-socket mcp.sock: would be removed (nothing listens on it: ")
				assert.Contains(t, r.stdout, "\nstale-socket "+outside+": would be removed (")
			} else {
				f := decode[recovery.Report](t, r).Findings
				assert.Equal(t, "mcp.sock", f[1].Path)
				assert.Equal(t, outside, f[2].Path)
			}
			for _, p := range []string{inside, outside} {
				_, err := os.Lstat(p)
				assert.NoError(t, err, "without --fix nothing changes")
			}

			r = mcpkeep(t, append([]string{"doctor", "--home", home, "--fix"}, m.args...)...)
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Equal(t, want, findings(t, m.args != nil, r))
			if m.args == nil {
				assert.Contains(t, r.stdout, "\nstale-socket mcp.sock: removed (")
			}
			for _, p := range []string{inside, outside} {
				assert.NoFileExists(t, p)
			}
			r = mcpkeep(t, "doctor", "--home", home)
			assert.Equal(t, exitOK, r.code, r.stdout)
		})
	}
	// A writer killed between binding its socket and renaming it into
	// place leaves a temporary socket, and no socket at the path.
	for _, m := range modes {
		t.Run("temporary/"+m.name, func(t *testing.T) {
			home := installed(t)
			const temp = ".mcp.sock.0a1b2c3d"
			tempPath := filepath.Join(home, temp)
			dead := exec.Command("true")
			require.NoError(t, dead.Run())
			require.NoError(t, os.WriteFile(filepath.Join(home, lifecycle.LockFile), []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o600))
			mcptest.DeadSocket(t, tempPath, false)
			want := []string{"stale-lock", "stale-socket"}

			r := mcpkeep(t, append([]string{"doctor", "--home", home}, m.args...)...)
			assert.Equal(t, exitError, r.code, "problems found")
			assert.Contains(t, r.stderr, "doctor --fix")
			assert.Equal(t, want, findings(t, m.args != nil, r))
			if m.args == nil {
				assert.Contains(t, r.stdout, "\nstale-socket "+temp+": would be removed (nothing listens on it: ")
			} else {
				assert.Equal(t, temp, decode[recovery.Report](t, r).Findings[1].Path)
			}
			_, err := os.Lstat(tempPath)
			assert.NoError(t, err, "without --fix nothing changes")

			r = mcpkeep(t, append([]string{"doctor", "--home", home, "--fix"}, m.args...)...)
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Equal(t, want, findings(t, m.args != nil, r))
			if m.args == nil {
				assert.Contains(t, r.stdout, "\nstale-socket "+temp+": removed (")
			}
			assert.NoFileExists(t, tempPath)
			r = mcpkeep(t, "doctor", "--home", home)
			assert.Equal(t, exitOK, r.code, r.stdout)
		})
	}
	t.Run("in use", func(t *testing.T) {
		home := installed(t)
		sock := filepath.Join(home, "mcp.sock")
		mcptest.DeadSocket(t, sock, true)
		r := mcpkeep(t, "doctor", "--home", home, "--fix")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Equal(t, "home "+home+": clean\n", r.stdout)
		_, err := os.Lstat(sock)
		assert.NoError(t, err, "a socket something listens on is left alone")
	})
}

// errorJSON decodes what a command prints with --json when it fails.
type errorJSON struct {
	Error string `json:"error"`
	Home  string `json:"home"`
}

// failed checks the stdout of a command that failed before its output:
// empty, or with --json (isJSON) the error as JSON, which says says and
// is returned.
func failed(t *testing.T, isJSON bool, r result, says string) errorJSON {
	t.Helper()
	if !isJSON {
		assert.Empty(t, r.stdout)
		return errorJSON{}
	}
	got := decode[errorJSON](t, r)
	assert.Contains(t, got.Error, says)
	return got
}

// TestJSONErrors: with --json, a command that fails before it printed
// its output prints the error as a JSON object on stdout, naming the home
// it was given; its exit status and stderr's one line are as without
// --json.
func TestJSONErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	bad := filepath.Join(t.TempDir(), "servers.json")
	require.NoError(t, os.WriteFile(bad, []byte("{not json"), 0o600))
	home := installed(t)
	tests := []struct {
		name string
		args []string
		code int
		home string // the JSON's home
		says string // in the JSON's error and on stderr
	}{
		{"status", []string{"status", "--home", missing}, exitError, missing, "does not exist"},
		{"doctor", []string{"doctor", "--home", missing}, exitError, missing, "does not exist"},
		{"doctor --fix", []string{"doctor", "--fix", "--home", missing}, exitError, missing, "does not exist"},
		{"history", []string{"history", "--home", missing}, exitError, missing, "does not exist"},
		{"rollback", []string{"rollback", "--home", home, "nope"}, exitError, home, `"nope"`},
		{"sync", []string{"sync", "--home", missing}, exitError, missing, "does not exist"},
		{"sync without a remote", []string{"sync", "--home", home}, exitError, home, "has no git remote"},
		{"a ~", []string{"status", "--home", "~/.helios"}, exitError, "~/.helios", "only a shell expands"},
		{"servers", []string{"servers", "--registry", bad}, exitError, "", bad},
		{"usage", []string{"history", "--home", home, "-n", "-1"}, exitUsage, home, "-n -1"},
		{"usage before --json", []string{"status", "--bogus"}, exitUsage, "", "-bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := mcpkeep(t, tt.args...)
			r := mcpkeep(t, append(tt.args, "--json")...)
			assert.Equal(t, tt.code, r.code, r.stderr)
			assert.Equal(t, text.code, r.code, "the exit status of the text output")
			assert.Equal(t, text.stderr, r.stderr, "stderr's line as without --json")
			assert.Empty(t, text.stdout, "nothing but the error, on stderr")
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
			assert.Contains(t, r.stderr, tt.says)
			got := decode[errorJSON](t, r)
			assert.Contains(t, got.Error, tt.says)
			assert.Contains(t, r.stderr, got.Error, "the same error")
			assert.Equal(t, tt.home, got.Home)
			var fields map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &fields))
			assert.LessOrEqual(t, len(fields), 2, "error and home only: %s", r.stdout)
		})
	}
	t.Run("unknown command", func(t *testing.T) {
		r := mcpkeep(t, "frobnicate", "--json")
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.stderr, "usage: mcpkeep COMMAND")
		assert.Equal(t, errorJSON{Error: `unknown command "frobnicate"`}, decode[errorJSON](t, r))
	})
	t.Run("output printed already", func(t *testing.T) {
		r := mcpkeep(t, "status", "--home", t.TempDir(), "--json") // not installed: no error
		require.Equal(t, exitOK, r.code, r.stderr)
		require.NoError(t, os.WriteFile(filepath.Join(home, statefile.FileName), []byte("{torn"), 0o600))
		t.Cleanup(func() { os.Remove(filepath.Join(home, statefile.FileName)) })
		r = mcpkeep(t, "status", "--home", home, "--json")
		assert.Equal(t, exitError, r.code, "a problem found")
		got := decode[statusOut](t, r) // one object: the status, not an error after it
		assert.Len(t, got.Problems, 1)
	})
}
