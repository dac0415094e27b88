package buildinfo

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const rev = "29135dbe39945f1004dd314be3efc5c43d7ce12e"

func TestDescribe(t *testing.T) {
	main := func(v string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: v}, Settings: settings}
	}
	dep := func(d debug.Module) *debug.BuildInfo {
		d.Path = ModulePath
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/notes", Version: "(devel)"}, Deps: []*debug.Module{&d}}
	}
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
		{Key: "vcs.time", Value: "2026-11-24T08:01:31Z"}, {Key: "vcs.modified", Value: "false"}}
	dirty := append(vcs[:3:3], debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	for _, tc := range []struct {
		name            string
		version, commit string // stamped with -X
		bi              *debug.BuildInfo
		want            Info
		wantString      string
	}{
		{name: "release stamp", version: "v1.2.3", commit: rev, bi: main("(devel)"),
			want: Info{Version: "v1.2.3", Commit: rev, Detail: "commit 29135dbe3994"}, wantString: "v1.2.3 (commit 29135dbe3994)"},
		{name: "stamp of a dirty tree", version: "v0.0.0-dev.7", commit: rev + "+dirty", bi: main("(devel)"),
			want: Info{Version: "v0.0.0-dev.7", Commit: rev, Detail: "commit 29135dbe3994, with uncommitted changes"}},
		{name: "stamp without a commit", version: "v1.2.3", bi: main("(devel)"), want: Info{Version: "v1.2.3"}, wantString: "v1.2.3"},
		{name: "local build, no vcs", bi: main("(devel)"),
			want: Info{Version: "devel", Detail: "a local build, no commit recorded"}},
		{name: "local build, vcs but no version", bi: main("(devel)", vcs...),
			want: Info{Version: "devel", Commit: rev, Detail: "commit 29135dbe3994 of 2026-11-24"}},
		{name: "local build, pseudo-version", bi: main("v0.0.0-20261124080131-29135dbe3994", vcs...),
			want: Info{Version: "v0.0.0-20261124080131-29135dbe3994", Commit: rev, Detail: "commit 29135dbe3994 of 2026-11-24, not a release"}},
		{name: "local build, dirty", bi: main("v0.0.0-20261124080131-29135dbe3994+dirty", dirty...),
			want: Info{Version: "v0.0.0-20261124080131-29135dbe3994+dirty", Commit: rev,
				Detail: "commit 29135dbe3994 of 2026-11-24, with uncommitted changes, not a release"}},
		{name: "go install at a tag", bi: main("v1.2.3", vcs...),
			want: Info{Version: "v1.2.3", Commit: rev, Detail: "commit 29135dbe3994"}},
		{name: "go install at a tag, no vcs", bi: main("v1.2.3"), want: Info{Version: "v1.2.3"}},
		{name: "dependency, release", bi: dep(debug.Module{Version: "v1.2.3"}), want: Info{Version: "v1.2.3"}},
		{name: "dependency, pseudo-version after a tag", bi: dep(debug.Module{Version: "v1.2.4-0.20261124080131-29135dbe3994"}),
			want: Info{Version: "v1.2.4-0.20261124080131-29135dbe3994", Detail: "commit 29135dbe3994 of 2026-11-24, not a release"}},
		{name: "dependency replaced by a directory", bi: dep(debug.Module{Version: "v0.0.0", Replace: &debug.Module{Path: "../mcpkeep", Version: "(devel)"}}),
			want:       Info{Version: "devel", Detail: "local directory ../mcpkeep, by a replace directive in go.mod"},
			wantString: "devel (local directory ../mcpkeep, by a replace directive in go.mod)"},
		{name: "dependency replaced by another version", bi: dep(debug.Module{Version: "v1.2.0", Replace: &debug.Module{Path: ModulePath, Version: "v1.2.1"}}),
			want: Info{Version: "v1.2.1", Detail: "in place of v1.2.0, by a replace directive in go.mod"}},
		{name: "dependency replaced by a fork", bi: dep(debug.Module{Version: "v1.2.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.2.1"}}),
			want: Info{Version: "v1.2.1", Detail: "of example.com/fork, in place of github.com/mcpkeep/mcpkeep v1.2.0 by a replace directive in go.mod"}},
		{name: "not listed", bi: &debug.BuildInfo{Main: debug.Module{Path: "example.com/other"}},
			want: Info{Version: "devel", Detail: "the binary's build information does not list github.com/mcpkeep/mcpkeep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(tc.version, tc.commit, tc.bi, true)
			assert.Equal(t, tc.want, got)
			if tc.wantString != "" {
				assert.Equal(t, tc.wantString, got.String())
			}
		})
	}
	assert.Equal(t, Info{Version: "devel", Detail: "no build information in the binary"}, describe("", "", nil, false))
}

// TestStampedBuild builds a program with the stamp a release build sets
// and one without, and reads what each says of itself.
func TestStampedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program twice")
	}
	dir := t.TempDir()
	build := func(name string, ldflags ...string) map[string]string {
		t.Helper()
		exe := filepath.Join(dir, name)
		args := append([]string{"build", "-trimpath", "-buildvcs=false", "-o", exe}, ldflags...)
		cmd := exec.Command("go", append(args, "./testdata/printinfo")...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(exe).Output()
		require.NoError(t, err)
		var got map[string]string
		require.NoError(t, json.Unmarshal(out, &got), "%s", out)
		return got
	}
	got := build("stamped", "-ldflags", "-X "+ModulePath+"/internal/buildinfo.version=v9.8.7 -X "+ModulePath+"/internal/buildinfo.commit="+rev)
	assert.Equal(t, map[string]string{"version": "v9.8.7", "commit": rev, "detail": "commit 29135dbe3994",
		"string": "v9.8.7 (commit 29135dbe3994)"}, got)

	got = build("local")
	assert.Equal(t, "devel", got["version"])
	assert.Contains(t, got["detail"], "no commit recorded", "a local build says why it names no commit")
}
