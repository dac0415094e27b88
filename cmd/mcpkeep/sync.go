package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// syncOut is what mcpkeep sync prints with --json.
type syncOut struct {
	Home string `json:"home"`
	// Remote is where the home stands with its remote after the sync, or,
	// beside a running server, as that server last reported it.
	Remote *gitstore.RemoteStatus `json:"remote,omitempty"`
	// Fetch is what the fetch brought in; Pushed whether the remote
	// took this home's commits. Both are absent beside a running server,
	// which syncs by itself.
	Fetch  *gitstore.Integration `json:"fetch,omitempty"`
	Pushed bool                  `json:"pushed"`
	// Conflicts lists the merges of files changed on both sides (this
	// home's version kept in async mode, the remote's in sync mode),
	// until resolved with --resolve TAG.
	Conflicts []gitstore.Conflict `json:"conflicts"`
	Resolved  string              `json:"resolved,omitempty"` // the tag --resolve removed
	Server    int                 `json:"server_pid,omitempty"`
	// Error is why a sync that had already fetched and merged failed
	// after (the push): what it did is still reported.
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// sync fetches the home's git remote, merges what it brings, pushes the
// home's commits, and prints ahead, behind and the conflicts to look at.
// Beside a running server it prints that server's last status and exits
// 3: the server syncs by itself, every interval.
func (c *cli) sync(ctx context.Context, args []string) error {
	set := c.flags("sync")
	home := c.homeFlag(set)
	url := set.String("remote", "", "the git remote's URL (default: env MCPKEEP_REMOTE, else the home's config/.git remote \"origin\")")
	timeout := set.Duration("timeout", gitstore.DefaultRemoteTimeout, "the longest the fetch, and then the push, may take")
	resolve := set.String("resolve", "", "remove the conflict tag TAG (conflicts/<time>) once its files are settled, and sync nothing")
	if _, err := c.parse(set, args, 0); err != nil {
		return err
	}
	abs, err := installedHome(*home)
	if err != nil {
		return err
	}
	var n notes
	env, closeEnv, err := lifecycle.OpenHome(abs, n.logger())
	if errors.Is(err, lifecycle.ErrLocked) {
		return c.syncBeside(abs, *resolve != "", err)
	}
	if err != nil {
		return err
	}
	out := syncOut{Home: abs}
	err = c.syncLocked(ctx, env.Store, abs, *url, *timeout, *resolve, &out)
	err = errors.Join(err, closeEnv())
	if err != nil && out.Fetch == nil && len(out.Conflicts) == 0 {
		return err // nothing done: run prints the error, with --json as {"error", "home"}
	}
	out.Notes = n.list()
	if out.Conflicts == nil {
		out.Conflicts = []gitstore.Conflict{}
	}
	if err != nil {
		// The fetch merged, and the push failed: what the merge did
		// (files taken, conflicts kept) is part of the answer.
		out.Error = oneLine(err)
	}
	return errors.Join(err, c.emit(out, n.text()+syncText(out)))
}

// syncLocked is sync with the home's lock held.
func (c *cli) syncLocked(ctx context.Context, store *gitstore.Store, home, url string, timeout time.Duration, resolve string, out *syncOut) error {
	if resolve != "" {
		if err := store.ResolveConflict(resolve); err != nil {
			return err
		}
		out.Resolved = resolve
		var err error
		out.Conflicts, err = store.Conflicts()
		return err
	}
	fromEnv, err := lifecycle.RemoteFromEnv()
	if err != nil {
		return &usageError{err.Error()}
	}
	fromEnv.URL = cmp.Or(url, fromEnv.URL)
	fromEnv.Timeout = timeout
	ro, ok, err := lifecycle.ResolveRemote(store, fromEnv)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("home %s has no git remote: pass --remote URL, set %s, or name one in the home with "+
			"`git -C %s remote add origin URL`", home, lifecycle.EnvRemote, filepath.Join(home, "config"))
	}
	remote, err := gitstore.NewRemote(store, &ro)
	if err != nil {
		return err
	}
	defer remote.Close()
	rep, err := remote.Sync(ctx)
	st := rep.Status
	out.Remote = &st
	if rep.Fetch.Action != "" {
		out.Fetch = &rep.Fetch
	}
	out.Pushed = rep.Pushed
	conflicts, cerr := store.Conflicts()
	out.Conflicts = conflicts
	return errors.Join(err, cerr)
}

// syncBeside prints what a running server last reported of its remote,
// and the home's conflicts, and returns the locked error: the server
// syncs by itself.
func (c *cli) syncBeside(home string, resolving bool, locked error) error {
	out := syncOut{Home: home, Conflicts: []gitstore.Conflict{}}
	if s, err := statefile.Read(filepath.Join(home, statefile.FileName)); err == nil {
		out.Server = s.PID
		if s.Remote != nil {
			out.Remote = fromState(s.Remote)
		}
	}
	if store, err := readOnlyStore(home, lifecycle.HomeMaxFileSize(home)); err == nil {
		if conflicts, err := store.Conflicts(); err == nil {
			out.Conflicts = conflicts
		}
		store.Close()
	}
	if err := c.emit(out, syncText(out)); err != nil {
		return err
	}
	if resolving {
		return fmt.Errorf("%w; stop it first: --resolve does not write beside a live server", locked)
	}
	return fmt.Errorf("%w; it syncs by itself every interval: its last status is above", locked)
}

// syncText renders out for the terminal.
func syncText(o syncOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "home:      %s\n", o.Home)
	if o.Resolved != "" {
		fmt.Fprintf(&b, "resolved:  %s (the merge commit still records both versions)\n", o.Resolved)
	}
	if o.Server != 0 {
		fmt.Fprintf(&b, "server:    pid %d runs on this home and syncs it by itself; as it last reported:\n", o.Server)
	}
	if r := o.Remote; r != nil {
		fmt.Fprintf(&b, "remote:    %s (%s, branch %s)\n", r.URL, r.Mode, r.Branch)
		if f := o.Fetch; f != nil {
			switch f.Action {
			case gitstore.ActionNone:
				b.WriteString("fetched:   nothing new\n")
			case gitstore.ActionAhead:
				b.WriteString("fetched:   nothing new (this home is ahead)\n")
			case gitstore.ActionFastForward:
				fmt.Fprintf(&b, "fetched:   fast-forwarded to %s\n", short(f.Commit))
			case gitstore.ActionMerge:
				fmt.Fprintf(&b, "fetched:   merged %s as %s: took %d file(s) changed there only", short(f.Remote), short(f.Commit), len(f.Taken))
				if len(f.Conflicts)+len(f.Refused) > 0 {
					whose := "this home's"
					if f.Kept == gitstore.KeptRemote {
						whose = "the remote's"
					}
					fmt.Fprintf(&b, "; kept %s version of %d, refused %d", whose, len(f.Conflicts), len(f.Refused))
				}
				b.WriteString("\n")
			}
		}
		if o.Server == 0 && o.Resolved == "" {
			switch {
			case o.Pushed:
				fmt.Fprintf(&b, "pushed:    the remote is at %s\n", short(r.Remote))
			case o.Error != "":
				b.WriteString("pushed:    no: the push failed (the error follows)\n")
			default:
				b.WriteString("pushed:    nothing (the remote had every commit)\n")
			}
		}
		fmt.Fprintf(&b, "ahead:     %d commit(s) the remote lacks", r.Ahead)
		if !r.OldestUnpushed.IsZero() {
			fmt.Fprintf(&b, " (the oldest from %s)", r.OldestUnpushed.Local().Format(time.DateTime))
		}
		fmt.Fprintf(&b, "\nbehind:    %d commit(s) of the remote not merged here\n", r.Behind)
		if r.Error != "" {
			fmt.Fprintf(&b, "error:     %s\n", flat(r.Error))
		}
	} else if o.Server != 0 {
		b.WriteString("remote:    none (the server replicates nothing)\n")
	}
	for _, cf := range o.Conflicts {
		kept, other := "this home's", "the remote's"
		if cf.Kept == gitstore.KeptRemote {
			kept, other = other, kept
		}
		for _, f := range cf.Files {
			fmt.Fprintf(&b, "conflict:  %s: changed on both sides, %s version kept; %s: git -C %s show %s:%s; "+
				"then mcpkeep sync --resolve %s\n", f, kept, other, filepath.Join(o.Home, "config"), cf.Tag, f, cf.Tag)
		}
		for _, f := range cf.Refused {
			fmt.Fprintf(&b, "refused:   %s from the remote (tag %s); then mcpkeep sync --resolve %s\n", f, cf.Tag, cf.Tag)
		}
	}
	return b.String()
}
