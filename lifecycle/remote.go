package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// RemoteOptions replicate the home's config repository through a git
// remote (gitstore.Remote): changes go there, and other homes' changes
// come here, every Interval, merged without losing either side.
// Fields left zero take the home's own setting (gitstore's RemoteConfig:
// the remote "origin" of config/.git/config and its mcpkeep.remote.*
// settings), then gitstore's defaults. No URL here or in the home: no
// remote.
type RemoteOptions struct {
	// URL of the remote: file:///path, https://host/path,
	// ssh://host/path or user@host:path. A password in it is used, never
	// written into the home or shown.
	URL string
	// Mode is "async" (a change is acknowledged once durable here, and
	// pushed in the background) or "sync" (acknowledged only once the
	// remote has it; a change fails, made nowhere, when the remote cannot
	// be reached or another writer moved it).
	Mode     string
	Interval time.Duration // how often to fetch (default 30 s)
	Timeout  time.Duration // for each fetch and push (default 30 s)
	Branch   string        // the remote branch (default the home's, main)
	// Credentials: nil takes them from the environment
	// (gitstore.CredentialsFromEnv: MCPKEEP_GIT_USERNAME,
	// MCPKEEP_GIT_PASSWORD, MCPKEEP_GIT_SSH_KEY, or the ssh agent).
	Credentials *gitstore.Credentials
	// Off ignores the home's setting: no remote.
	Off bool
}

// Environment variables RemoteFromEnv reads.
const (
	EnvRemote         = "MCPKEEP_REMOTE"          // the URL
	EnvRemoteMode     = "MCPKEEP_REMOTE_MODE"     // async or sync
	EnvRemoteInterval = "MCPKEEP_REMOTE_INTERVAL" // a duration: 30s, 5m
)

// RemoteFromEnv returns the remote options the environment sets
// (MCPKEEP_REMOTE, MCPKEEP_REMOTE_MODE, MCPKEEP_REMOTE_INTERVAL), for a
// binary's flag defaults. A bad value is an error naming the variable.
func RemoteFromEnv() (RemoteOptions, error) {
	o := RemoteOptions{URL: os.Getenv(EnvRemote), Mode: os.Getenv(EnvRemoteMode)}
	if o.Mode != "" {
		if _, err := gitstore.ParseRemoteMode(o.Mode); err != nil {
			return o, fmt.Errorf("lifecycle: %s=%q: want async or sync", EnvRemoteMode, o.Mode)
		}
	}
	if v := os.Getenv(EnvRemoteInterval); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("lifecycle: %s=%q: want a duration such as 30s or 5m", EnvRemoteInterval, v)
		}
		o.Interval = d
	}
	return o, nil
}

// ResolveRemote returns the gitstore options of the remote o and the
// home's own setting in store name, field by field (o first), and whether
// there is a remote at all.
func ResolveRemote(store *gitstore.Store, o RemoteOptions) (gitstore.RemoteOptions, bool, error) {
	if o.Off {
		return gitstore.RemoteOptions{}, false, nil
	}
	home, inHome, err := store.RemoteConfig()
	if err != nil {
		return gitstore.RemoteOptions{}, false, err
	}
	out := gitstore.RemoteOptions{URL: o.URL, Interval: o.Interval, Timeout: o.Timeout, Branch: o.Branch, Credentials: o.Credentials}
	if out.URL == "" {
		if !inHome {
			return out, false, nil
		}
		out.URL = home.URL
	}
	switch {
	case o.Mode != "":
		if out.Mode, err = gitstore.ParseRemoteMode(o.Mode); err != nil {
			return out, false, fmt.Errorf("lifecycle: RemoteOptions.Mode %q: want async or sync", o.Mode)
		}
	case inHome:
		out.Mode = home.Mode
	}
	if out.Interval == 0 && inHome {
		out.Interval = home.Interval
	}
	if out.Branch == "" && inHome {
		out.Branch = home.Branch
	}
	return out, true, nil
}

// withTurn runs fn in the transactions' turn: no transaction's function
// runs meanwhile (a merge from the remote goes through it).
func (e *Env) withTurn(fn func() error) error {
	e.init()
	e.turn <- struct{}{}
	defer func() { <-e.turn }()
	return fn()
}

// startRemote attaches the remote of the harness's options or the home to
// env's store, when there is one; in sync mode it first brings the store
// up to the remote (every change the remote acknowledged), waiting at
// most the remote's Timeout. status receives each new status; mayPush
// says whether this server is the writer, which alone pushes (nil:
// always).
func (h *Harness) startRemote(ctx context.Context, env *Env, status func(gitstore.RemoteStatus), mayPush func() bool) (*gitstore.Remote, error) {
	ro, ok, err := ResolveRemote(env.Store, h.opts.Remote)
	if err != nil || !ok {
		return nil, err
	}
	ro.WithTurn, ro.OnStatus, ro.MayPush, ro.Logger = env.withTurn, status, mayPush, h.log
	remote, err := gitstore.NewRemote(env.Store, &ro)
	if err != nil {
		return nil, err
	}
	log := h.log.With("remote", remote.URL(), "mode", remote.Mode().String())
	if remote.Mode() == gitstore.RemoteSync {
		in, err := remote.Fetch(ctx)
		if err != nil {
			log.Error("remote: could not catch up before serving; changes fail until it can be reached", "err", err)
		} else {
			log.Info("remote: caught up before serving", "action", in.Action, "commit", in.Commit)
		}
	}
	log.Info("remote: replicating the config repository")
	return remote, nil
}

// remoteStatusWriter writes a remote's status into the state file, at
// most once a second: after each fetch and push the remote reports it,
// and in async mode that is after each burst of changes.
type remoteStatusWriter struct {
	mu     sync.Mutex
	latest *gitstore.RemoteStatus
	signal chan struct{}
}

func newRemoteStatusWriter() *remoteStatusWriter {
	return &remoteStatusWriter{signal: make(chan struct{}, 1)}
}

// set records st; it never blocks.
func (w *remoteStatusWriter) set(st gitstore.RemoteStatus) {
	w.mu.Lock()
	w.latest = &st
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// drop forgets the status set so far: the state file starts with it.
func (w *remoteStatusWriter) drop() {
	w.mu.Lock()
	w.latest = nil
	w.mu.Unlock()
	select {
	case <-w.signal:
	default:
	}
}

// run writes the latest status with update until ctx is done.
func (w *remoteStatusWriter) run(ctx context.Context, update func(func(*statefile.State)) error, log *slog.Logger) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.signal:
		}
		if wait := time.Until(last.Add(time.Second)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		w.mu.Lock()
		st := w.latest
		w.mu.Unlock()
		if st == nil {
			continue
		}
		last = time.Now()
		if err := update(func(s *statefile.State) { s.Remote = stateRemote(*st) }); err != nil {
			log.Error("remote: could not write its status into the state file", "err", err)
		}
	}
}

// stateRemote converts a remote's status for the state file.
func stateRemote(st gitstore.RemoteStatus) *statefile.Remote {
	return &statefile.Remote{URL: st.URL, Mode: st.Mode, Branch: st.Branch, Head: st.Head, Remote: st.Remote,
		Ahead: st.Ahead, Behind: st.Behind, OldestUnpushed: st.OldestUnpushed, LastFetch: st.LastFetch,
		LastPush: st.LastPush, Error: st.Error, Conflicts: st.Conflicts}
}
