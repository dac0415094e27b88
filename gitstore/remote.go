package gitstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Errors of a remote that callers branch on.
var (
	// ErrRemote is matched by every *RemoteError.
	ErrRemote = errors.New("gitstore: remote")
	// ErrRemoteMoved: a push found the remote's branch at a commit other
	// than the one this store last saw there. Another writer pushed; the
	// store fetched what it pushed, and merges it at its next Fetch.
	ErrRemoteMoved = errors.New("gitstore: another writer moved the remote")
	// ErrNotWriter: a push was not tried because this store is not the
	// writer that may move the remote's branch (RemoteOptions.MayPush
	// said no).
	ErrNotWriter = errors.New("gitstore: this home is not the remote's writer; it only fetches")
)

// RemoteMode says when a change counts as made.
type RemoteMode int

const (
	// RemoteAsync acknowledges a change once it is durable here; a
	// pusher in Run pushes it, backing off while the remote cannot be
	// reached. Status says how far behind the remote is.
	RemoteAsync RemoteMode = iota
	// RemoteSync acknowledges a change only once the remote has it: Apply
	// pushes each batch before its first barrier, and a push the remote
	// refuses fails the batch, which is then written nowhere.
	RemoteSync
)

// String returns "async" or "sync".
func (m RemoteMode) String() string {
	if m == RemoteSync {
		return "sync"
	}
	return "async"
}

// ParseRemoteMode parses "async" or "sync" ("" is async).
func ParseRemoteMode(s string) (RemoteMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "async":
		return RemoteAsync, nil
	case "sync":
		return RemoteSync, nil
	}
	return 0, fmt.Errorf("gitstore: remote mode %q: want async or sync", s)
}

// Defaults for RemoteOptions fields left zero.
const (
	DefaultRemoteInterval = 30 * time.Second
	DefaultRemoteTimeout  = 30 * time.Second
	DefaultRemoteName     = "origin"
)

// RemoteOptions configure a Remote.
type RemoteOptions struct {
	// URL of the remote repository: file:///path, http(s)://host/path,
	// ssh://[user@]host/path or user@host:path. A password in it is used
	// and never shown: every message and Status give the URL with its
	// password replaced by "xxxxx". file:// URLs run the git CLI's
	// upload-pack and receive-pack, so they need git installed.
	URL string
	// Branch is the remote branch; "" means the store's own branch.
	Branch string
	// Mode is RemoteAsync (the zero value) or RemoteSync.
	Mode RemoteMode
	// Interval is how often Run fetches, and the longest a pusher backs
	// off: default DefaultRemoteInterval.
	Interval time.Duration
	// Timeout bounds each fetch and push: default DefaultRemoteTimeout.
	Timeout time.Duration
	// Credentials authenticate; the zero value takes them from the
	// environment (CredentialsFromEnv), and for ssh from the ssh agent.
	Credentials *Credentials
	// WithTurn, if set, runs fn while no change is being prepared: Fetch
	// merges through it, so that a change never reads a file a merge is
	// about to replace. lifecycle.Env sets it to its transactions' turn.
	WithTurn func(fn func() error) error
	// OnStatus, if set, is called (from Run's goroutine, or a Fetch or
	// Push caller's) after each fetch and push with the new Status. It
	// must not block.
	OnStatus func(RemoteStatus)
	// MayPush, if set, reports whether this store is now the writer that
	// may move the remote's branch (lifecycle: the active writer elected
	// among hosts). While it says no the remote is only fetched: Run and
	// Push push nothing (Push returns ErrNotWriter), Fetch fast-forwards
	// but leaves diverged histories unmerged (ActionDiverged: a merge
	// would have to be pushed), and in RemoteSync mode a change fails,
	// made nowhere. nil: always the writer.
	MayPush func() bool
	Logger  *slog.Logger // nil = the store's
}

// Credentials authenticate to a remote. Nothing of them is written into
// the home, logged or put in an error.
type Credentials struct {
	// Username and Password for HTTP(S) basic authentication; a token
	// goes in Password (with any Username, which some hosts want).
	Username, Password string
	// SSHKeyFile is a private key for ssh URLs; "" uses the ssh agent
	// (SSH_AUTH_SOCK). SSHKeyPassphrase decrypts it.
	SSHKeyFile, SSHKeyPassphrase string
}

// Environment variables CredentialsFromEnv reads.
const (
	EnvGitUsername      = "MCPKEEP_GIT_USERNAME"
	EnvGitPassword      = "MCPKEEP_GIT_PASSWORD" // or a token
	EnvGitSSHKey        = "MCPKEEP_GIT_SSH_KEY"  // a private key file
	EnvGitSSHPassphrase = "MCPKEEP_GIT_SSH_PASSPHRASE"
)

// CredentialsFromEnv returns the credentials in the environment:
// MCPKEEP_GIT_USERNAME and MCPKEEP_GIT_PASSWORD for HTTP(S),
// MCPKEEP_GIT_SSH_KEY and MCPKEEP_GIT_SSH_PASSPHRASE for ssh (without a
// key file, ssh uses the agent at SSH_AUTH_SOCK).
func CredentialsFromEnv() Credentials {
	return Credentials{
		Username: os.Getenv(EnvGitUsername), Password: os.Getenv(EnvGitPassword),
		SSHKeyFile: os.Getenv(EnvGitSSHKey), SSHKeyPassphrase: os.Getenv(EnvGitSSHPassphrase),
	}
}

// RemoteError reports a fetch or push that failed. Its message and URL
// carry no credentials; it matches ErrRemote and, when another writer
// moved the remote, ErrRemoteMoved.
type RemoteError struct {
	Op  string // "fetch" or "push"
	URL string // the remote, its password replaced
	Msg string // what happened, credentials replaced
	// Moved is set when the remote's branch was not where this store
	// last saw it (ErrRemoteMoved).
	Moved bool
}

// Error says what failed, where, and what happens next.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("gitstore: %s %s: %s", e.Op, e.URL, e.Msg)
}

// Unwrap returns ErrRemote, and ErrRemoteMoved when the remote moved.
func (e *RemoteError) Unwrap() []error {
	if e.Moved {
		return []error{ErrRemote, ErrRemoteMoved}
	}
	return []error{ErrRemote}
}

// RedactURL returns u with the password of its user information, if it
// has one, replaced by "xxxxx". Anything that does not parse as a URL is
// returned with everything before an "@" in its first part replaced, so
// that no form of a secret survives.
func RedactURL(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		if _, has := p.User.Password(); has {
			p.User = url.UserPassword(p.User.Username(), "xxxxx")
			return p.String()
		}
		return u
	} else if err == nil {
		return u
	}
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			return u[:i+3] + "xxxxx" + rest[at:]
		}
	}
	return u
}

// redactor replaces the secrets of one remote in messages.
type redactor struct {
	raw, safe string
	secrets   []string
}

func newRedactor(rawURL string, c Credentials) redactor {
	r := redactor{raw: rawURL, safe: RedactURL(rawURL)}
	if p, err := url.Parse(rawURL); err == nil && p.User != nil {
		if pw, ok := p.User.Password(); ok && pw != "" {
			r.secrets = append(r.secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	for _, s := range []string{c.Password, c.SSHKeyPassphrase} {
		if s != "" {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// clean returns msg with the raw URL and every secret replaced.
func (r redactor) clean(msg string) string {
	if r.raw != "" && r.raw != r.safe {
		msg = strings.ReplaceAll(msg, r.raw, r.safe)
	}
	for _, s := range r.secrets {
		if len(s) >= 3 { // a one- or two-character secret would blank the message
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}

// errorf returns a *RemoteError for op, its message made from format and
// args with secrets replaced.
func (r redactor) errorf(op string, moved bool, format string, args ...any) *RemoteError {
	return &RemoteError{Op: op, URL: r.safe, Msg: r.clean(fmt.Sprintf(format, args...)), Moved: moved}
}

// RemoteStatus is where a store stands with its remote.
type RemoteStatus struct {
	URL    string `json:"url"`    // the remote, its password replaced
	Mode   string `json:"mode"`   // "async" or "sync"
	Branch string `json:"branch"` // the remote branch pushed and fetched
	// Head is this store's last commit; Remote the remote branch's, as
	// this store last saw it ("" before the first fetch or push, or when
	// the remote has no such branch).
	Head   string `json:"head,omitempty"`   // this store's last commit
	Remote string `json:"remote,omitempty"` // the remote branch's last commit, as last seen
	// Ahead counts the commits here the remote lacks (what a push would
	// send); Behind those the remote has that are not merged here yet.
	// Both are counted after each fetch and push, up to 10,000.
	Ahead  int `json:"ahead"`  // commits here the remote lacks
	Behind int `json:"behind"` // commits of the remote not merged here yet
	// OldestUnpushed is when the oldest commit the remote lacks was
	// made, zero when it lacks none: how far behind, in time.
	OldestUnpushed time.Time `json:"oldest_unpushed,omitzero"`
	LastFetch      time.Time `json:"last_fetch,omitzero"` // when a fetch last worked, zero before the first
	LastPush       time.Time `json:"last_push,omitzero"`  // when a push last worked, zero before the first
	// Error is why the last fetch or push failed; "" when it worked.
	Error string `json:"error,omitempty"`
	// Conflicts lists the conflicts/<time> tags of merges that kept this
	// store's version of a file both sides changed (see Store.Conflicts).
	Conflicts []string `json:"conflicts,omitempty"`
}

// Remote replicates a Store's branch to and from one git remote: Fetch
// brings the remote's commits in (a fast-forward, or a merge that loses
// neither side), Push sends this store's, never forcing, and Run does
// both in the background. In RemoteSync mode the store's Apply pushes
// each batch before making it durable. A Remote is for the store's
// writer; its methods may be called from several goroutines. Close
// detaches it from the store.
type Remote struct {
	s      *Store
	opts   RemoteOptions
	branch plumbing.ReferenceName // on the remote
	track  plumbing.ReferenceName // refs/remotes/origin/<branch>, here
	red    redactor
	creds  Credentials
	log    *slog.Logger

	pushMu   sync.Mutex // one push or fetch on the wire at a time
	mu       sync.Mutex // guards what follows
	seen     plumbing.Hash
	seenOK   bool            // seen was read from the remote or the tracking ref
	known    []plumbing.Hash // commits the remote has had, newest last (for push)
	status   RemoteStatus    // counts and times
	kick     chan struct{}   // a commit was made here: the pusher pushes
	fetchNow chan struct{}   // the remote moved: Run fetches now
	closed   bool
}
