// Package buildinfo says which mcpkeep a binary was built from, in words a
// person reading a version line understands: the version and commit a
// release build stamped in with -ldflags -X (scripts/release does), else
// what the Go toolchain recorded in the binary: the module's version, a
// replace directive pointing at a local directory or another module, or the
// git commit of a local build.
//
// It does not guess: a local build made without version control
// information (-buildvcs=false, or outside a git checkout) says so rather
// than naming a commit.
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
)

// ModulePath is the path of the mcpkeep module.
const ModulePath = "github.com/mcpkeep/mcpkeep"

// Stamped by a release build:
//
//	-ldflags "-X github.com/mcpkeep/mcpkeep/internal/buildinfo.version=v1.2.3
//	          -X github.com/mcpkeep/mcpkeep/internal/buildinfo.commit=<40 hex digits>"
//
// A commit ending in "+dirty" was built with uncommitted changes.
var version, commit string

// Info is which mcpkeep a binary holds.
type Info struct {
	// Version is a Go module version ("v1.2.3", a pseudo-version such as
	// "v0.0.0-20261124080131-29135dbe3994"), or "devel" when the build
	// recorded none.
	Version string
	// Commit is the full git commit the binary was built from, or "" when
	// nothing recorded it.
	Commit string
	// Detail says in words where a version that is not a release came from
	// (a local directory, a commit, uncommitted changes); for a release it
	// names the commit. "" when there is nothing to add.
	Detail string
}

// String is Version followed by Detail in parentheses, for example
// "v1.2.3 (commit 1a2b3c4d5e6f)" or "devel (local directory ../mcpkeep,
// by a replace directive in go.mod)".
func (i Info) String() string {
	if i.Detail == "" {
		return i.Version
	}
	return i.Version + " (" + i.Detail + ")"
}

// Read returns the Info of the running binary.
func Read() Info { return read() }

var read = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	return describe(version, commit, bi, ok)
})

// shortCommit is how many hex digits of a commit a line shows, as Go's
// pseudo-versions do.
const shortCommit = 12

// pseudo matches a Go pseudo-version's time and commit, with Go's "+dirty"
// suffix for a build with uncommitted changes.
var pseudo = regexp.MustCompile(`(?:^|[.-])(\d{14})-([0-9a-f]{12})(\+dirty)?$`)

// describe is Read's logic on given stamps and build information.
func describe(stampedVersion, stampedCommit string, bi *debug.BuildInfo, ok bool) Info {
	if stampedVersion != "" {
		rev, dirty := strings.CutSuffix(stampedCommit, "+dirty")
		i := Info{Version: stampedVersion, Commit: rev}
		if rev != "" {
			i.Detail = commitWords(rev, "", dirty)
		}
		return i
	}
	if !ok || bi == nil {
		return Info{Version: "devel", Detail: "no build information in the binary"}
	}
	if bi.Main.Path == ModulePath {
		return describeMain(bi)
	}
	for _, d := range bi.Deps {
		if d.Path == ModulePath {
			return describeDep(d)
		}
	}
	return Info{Version: "devel", Detail: "the binary's build information does not list " + ModulePath}
}

// describeMain describes mcpkeep built as the main module: a local build
// in a checkout, or `go install ...@version`.
func describeMain(bi *debug.BuildInfo) Info {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	rev, modified := settings["vcs.revision"], settings["vcs.modified"] == "true"
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		if rev == "" {
			return Info{Version: "devel", Detail: "a local build, no commit recorded"}
		}
		when, _, _ := strings.Cut(settings["vcs.time"], "T")
		return Info{Version: "devel", Commit: rev, Detail: commitWords(rev, when, modified)}
	}
	i := Info{Version: v, Commit: rev}
	if m := pseudo.FindStringSubmatch(v); m != nil {
		if rev == "" {
			rev = m[2]
		}
		i.Detail = commitWords(rev, pseudoTime(m[1]), modified || m[3] != "") + ", not a release"
	} else if rev != "" {
		i.Detail = commitWords(rev, "", modified)
	}
	return i
}

// describeDep describes mcpkeep as a dependency of another module: a
// release, a pseudo-version, or a replace directive.
func describeDep(d *debug.Module) Info {
	if r := d.Replace; r != nil {
		if r.Version == "" || r.Version == "(devel)" {
			// A directory replacement, go.mod's "=> ../mcpkeep": the
			// toolchain records its version as "(devel)".
			return Info{Version: "devel", Detail: fmt.Sprintf("local directory %s, by a replace directive in go.mod", r.Path)}
		}
		if r.Path == ModulePath {
			return Info{Version: r.Version, Detail: fmt.Sprintf("in place of %s, by a replace directive in go.mod", d.Version)}
		}
		return Info{Version: r.Version, Detail: fmt.Sprintf("of %s, in place of %s %s by a replace directive in go.mod", r.Path, ModulePath, d.Version)}
	}
	i := Info{Version: d.Version}
	if m := pseudo.FindStringSubmatch(d.Version); m != nil {
		i.Detail = commitWords(m[2], pseudoTime(m[1]), false) + ", not a release"
	}
	return i
}

// commitWords is "commit 1a2b3c4d5e6f of 2026-11-24", with ", with
// uncommitted changes" when the tree was modified.
func commitWords(rev, when string, modified bool) string {
	var b strings.Builder
	b.WriteString("commit " + short(rev))
	if when != "" {
		b.WriteString(" of " + when)
	}
	if modified {
		b.WriteString(", with uncommitted changes")
	}
	return b.String()
}

// pseudoTime turns a pseudo-version's 20261124080131 into 2026-11-24.
func pseudoTime(ts string) string { return ts[0:4] + "-" + ts[4:6] + "-" + ts[6:8] }

// short is the first shortCommit hex digits of a commit.
func short(rev string) string {
	if len(rev) > shortCommit {
		return rev[:shortCommit]
	}
	return rev
}
