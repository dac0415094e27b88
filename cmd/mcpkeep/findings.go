package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/internal/proc"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/recovery"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// kindLostStamp is the kind of the finding of a home whose bootstrap
// stamp (.version) is missing or does not parse while its config
// repository is there: an installed home that lost its stamp, not an
// interrupted install. The next start of the home's own server writes it
// anew (bootstrap refuses the home to a server that its config history
// says is another); doctor --fix does not, since only the server knows
// its schema.
const kindLostStamp = "lost-stamp"

// stampFinding returns the finding, for status and doctor alike, of the
// stamp of home, whose bootstrap.Detect gave info and err: a stamp, or a
// home, that cannot be read (err), or a lost stamp (kindLostStamp). A
// stamp that is missing over no config repository is an interrupted
// install, which the next start finishes: no finding here (doctor's
// recovery reports it as not-installed).
func stampFinding(home string, info bootstrap.Info, err error) (recovery.Finding, bool) {
	if err != nil {
		f := recovery.Finding{Kind: recovery.KindUnreadableFile, Path: ".", Action: "none", Detail: flat(err.Error()), NeedsUser: true,
			Remedy: "a home's files must belong to the user its server runs as: give them back to it (chown -R, chmod u+rwX)"}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			if rel, rerr := filepath.Rel(home, pe.Path); rerr == nil && filepath.IsLocal(rel) {
				f.Path = filepath.ToSlash(rel)
			}
			f.Detail = pe.Err.Error()
		}
		return f, true
	}
	if info.State != bootstrap.Incomplete {
		return recovery.Finding{}, false
	}
	if _, err := os.Stat(filepath.Join(home, bootstrap.ConfigDir, ".git")); err != nil {
		return recovery.Finding{}, false // an interrupted install
	}
	what := "is missing"
	if _, err := os.Lstat(filepath.Join(home, bootstrap.VersionFile)); err == nil {
		what = "does not parse"
	}
	return recovery.Finding{Kind: kindLostStamp, Path: bootstrap.VersionFile, Action: "none", NeedsUser: true,
		Detail: fmt.Sprintf("the stamp %s, but %s/ holds the home's history: the stamp is lost, the install was not interrupted",
			what, bootstrap.ConfigDir),
		Remedy: "start the home's own server once: its next start writes the stamp anew " +
			"(a server that the history says is another is refused the home)"}, true
}

// kindStoppedServer is the kind of the finding of a server that runs on
// the home but is stopped (SIGSTOP, Ctrl-Z, a debugger): it holds the
// home's lock and answers no client, and no other process may take over.
const kindStoppedServer = "stopped-server"

// stoppedFinding returns the finding, for status and doctor alike, of the
// server pid that holds the home and is stopped.
func stoppedFinding(pid int) recovery.Finding {
	return recovery.Finding{Kind: kindStoppedServer, Path: statefile.FileName, Action: "none", NeedsUser: true,
		Detail: fmt.Sprintf("pid %d holds the home but is stopped (kill -STOP, Ctrl-Z or a debugger): it answers no client of "+
			"the home, and no other process can take over", pid),
		Remedy: fmt.Sprintf("continue it (kill -CONT %d), or end it (kill %d)", pid, pid)}
}

// stoppedWriter returns the server that holds the home and is stopped:
// the one its state file s names, or its PID lock file (as readLock read
// it: lock, or the read's error lerr), if it runs.
func stoppedWriter(lock []byte, lerr error, s *statefile.State) (int, bool) {
	if s.Alive() {
		return s.PID, proc.Stopped(s.PID)
	}
	if pid, err := lifecycle.ParseLockContent(lock); lerr == nil && err == nil && lifecycle.LockHolderLive(pid, s) {
		return pid, proc.Stopped(pid)
	}
	return 0, false
}
