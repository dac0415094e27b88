package gitstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// RemoteConfig reads the remote the repository's own config names, the
// way the git CLI sets it up:
//
//	git -C <home>/config remote add origin https://host/config.git
//	git -C <home>/config config mcpkeep.remote.mode sync       # or async, the default
//	git -C <home>/config config mcpkeep.remote.interval 30s
//	git -C <home>/config config mcpkeep.remote.branch main     # default: the store's branch
//
// ok is false when the config names no remote "origin". Credentials are
// not read from it: they come from the environment (CredentialsFromEnv).
// A bad mode or interval is an error naming the setting and the file.
func (s *Store) RemoteConfig() (opts RemoteOptions, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, err := s.repo.Config()
	if err != nil {
		return opts, false, err
	}
	rc, found := cfg.Remotes[DefaultRemoteName]
	if !found || len(rc.URLs) == 0 || strings.TrimSpace(rc.URLs[0]) == "" {
		return opts, false, nil
	}
	opts.URL = rc.URLs[0]
	file := s.rel(s.gitDir) + "/config"
	if cfg.Raw != nil {
		sub := cfg.Raw.Section("mcpkeep").Subsection("remote")
		if m := sub.Option("mode"); m != "" {
			if opts.Mode, err = ParseRemoteMode(m); err != nil {
				return opts, false, fmt.Errorf("gitstore: mcpkeep.remote.mode in %s: %w", file, err)
			}
		}
		if v := sub.Option("interval"); v != "" {
			if opts.Interval, err = time.ParseDuration(v); err != nil || opts.Interval <= 0 {
				return opts, false, fmt.Errorf("gitstore: mcpkeep.remote.interval %q in %s: want a duration such as 30s or 5m", v, file)
			}
		}
		opts.Branch = sub.Option("branch")
	}
	return opts, true, nil
}

// LastSeen returns where the store stood with a remote whose branch is
// branch ("" for the store's own) when it last fetched or pushed, from
// the tracking ref alone, without the network: for a tool that looks at a
// home with no server running. url, shown as given with its password
// replaced, is not contacted. A ReadOnly store works.
func (s *Store) LastSeen(url, branch string) (RemoteStatus, error) {
	if branch == "" {
		branch = strings.TrimPrefix(s.branch, "refs/heads/")
	}
	st := RemoteStatus{URL: RedactURL(url), Branch: branch}
	s.mu.Lock()
	seen := plumbing.ZeroHash
	if ref, err := s.repo.Reference(plumbing.NewRemoteReferenceName(DefaultRemoteName, branch), false); err == nil && ref.Type() == plumbing.HashReference {
		seen = ref.Hash()
	}
	s.mu.Unlock()
	ahead, behind, oldest, head := s.aheadBehind(seen, nil)
	st.Head, st.Remote = hashOrEmpty(head), hashOrEmpty(seen)
	st.Ahead, st.Behind, st.OldestUnpushed = ahead, behind, oldest
	conflicts, err := s.Conflicts()
	for _, c := range conflicts {
		st.Conflicts = append(st.Conflicts, c.Tag)
	}
	return st, err
}
