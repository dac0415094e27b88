package gitstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The wire: gitstore speaks git's protocol through go-git's transports
// (plumbing), not through go-git's Remote, so that it controls what a
// fetch stores (no thin pack, whose bases go-git cannot resolve into a
// pack on disk; the tracking ref written atomically) and what a push
// sends (the objects of the new commits only, found from the trees they
// change, where go-git walks the whole history the remote has) and
// checks (the remote branch where this store last saw it: a
// compare-and-swap, never a force).

// endpoint returns the transport, endpoint and authentication of the
// remote.
func (r *Remote) endpoint(op string) (transport.Transport, *transport.Endpoint, transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(r.opts.URL)
	if err != nil {
		return nil, nil, nil, r.red.errorf(op, false, "the URL does not parse (%v): give file:///path, https://host/path or ssh://host/path", err)
	}
	var auth transport.AuthMethod
	switch ep.Protocol {
	case "file":
		// go-git serves a file:// remote by running git's own
		// upload-pack and receive-pack.
		if _, err := exec.LookPath("git"); err != nil {
			return nil, nil, nil, r.red.errorf(op, false, "a file:// remote needs the git command, which is not on PATH (%v): install git, or give an https:// or ssh:// URL", err)
		}
	case "http", "https":
		if r.creds.Username != "" || r.creds.Password != "" {
			auth = &githttp.BasicAuth{Username: r.creds.Username, Password: r.creds.Password}
		}
	case "ssh":
		if r.creds.SSHKeyFile != "" {
			user := ep.User
			if user == "" {
				user = "git"
			}
			keys, err := gitssh.NewPublicKeysFromFile(user, r.creds.SSHKeyFile, r.creds.SSHKeyPassphrase)
			if err != nil {
				return nil, nil, nil, r.red.errorf(op, false, "the ssh key %s (%s) cannot be used: %v", r.creds.SSHKeyFile, EnvGitSSHKey, err)
			}
			auth = keys
		} // else go-git asks the ssh agent
	default:
		return nil, nil, nil, r.red.errorf(op, false, "protocol %q is not supported: use file://, http://, https:// or ssh://", ep.Protocol)
	}
	tr, err := client.NewClient(ep)
	if err != nil {
		return nil, nil, nil, r.red.errorf(op, false, "%v", err)
	}
	return tr, ep, auth, nil
}

// wireError turns a transport error into a *RemoteError with a remedy.
func (r *Remote) wireError(op string, err error) error {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	hint := ""
	var hostKey *knownhosts.KeyError
	switch {
	case errors.As(err, &hostKey):
		if len(hostKey.Want) > 0 {
			hint = " (the server's host key is not the one known_hosts has for it: check why before you replace that line)"
		} else {
			hint = " (the server's host key is not in known_hosts: check it, then add it, e.g. with ssh-keyscan, to ~/.ssh/known_hosts or the file SSH_KNOWN_HOSTS names)"
		}
	case strings.Contains(err.Error(), "ssh: unable to authenticate"):
		hint = fmt.Sprintf(" (the server took no key offered: set %s to a key file it authorizes, or add one to the ssh agent at SSH_AUTH_SOCK)", EnvGitSSHKey)
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		hint = fmt.Sprintf(" (set %s and %s, or for ssh %s or an ssh agent)", EnvGitUsername, EnvGitPassword, EnvGitSSHKey)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		hint = " (check the URL; the repository must exist: create it with git init --bare)"
	case errors.Is(err, context.DeadlineExceeded):
		hint = fmt.Sprintf(" (no answer within %v)", r.opts.Timeout)
	}
	return r.red.errorf(op, false, "%v%s", err, hint)
}

// advertised returns the commit the remote's branch names (ZeroHash when
// the remote has no such branch, or no commit at all) and the remote's
// capabilities.
func (r *Remote) advertised(ctx context.Context, sess transport.Session) (plumbing.Hash, *packp.AdvRefs, error) {
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, nil, nil
	}
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	refs, err := ar.AllReferences()
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	ref, err := refs.Reference(r.branch)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, ar, nil
	}
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	if ref.Type() != plumbing.HashReference {
		return plumbing.ZeroHash, nil, fmt.Errorf("the remote's %s is a symbolic ref", r.branch)
	}
	return ref.Hash(), ar, nil
}

// download asks the remote for want, telling it the commits of haves,
// and writes what it sends as one pack, durably (through the store's
// syncing storage). It does not ask for a thin pack: go-git writes a
// pack to disk as it comes and cannot resolve deltas against objects
// outside it.
func (r *Remote) download(ctx context.Context, sess transport.UploadPackSession, ar *packp.AdvRefs, want plumbing.Hash, haves []plumbing.Hash) error {
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	req.Capabilities.Delete(capability.ThinPack)
	if ar.Capabilities.Supports(capability.NoProgress) {
		_ = req.Capabilities.Set(capability.NoProgress)
	}
	req.Wants = []plumbing.Hash{want}
	req.Haves = haves
	reader, err := sess.UploadPack(ctx, req)
	if errors.Is(err, transport.ErrEmptyUploadPackRequest) {
		return nil
	}
	if err != nil {
		return err
	}
	defer reader.Close()
	var in io.Reader = reader
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		in = sideband.NewDemuxer(sideband.Sideband64k, reader)
	case req.Capabilities.Supports(capability.Sideband):
		in = sideband.NewDemuxer(sideband.Sideband, reader)
	}
	st := newStorage(r.s.gitDir)
	defer st.Close()
	err = packfile.UpdateObjectStorage(st, in)
	if errors.Is(err, packfile.ErrEmptyPackfile) {
		return nil
	}
	return err
}

// upload sends the objects of objs and asks the remote to move its
// branch from old to new: the remote refuses if the branch is not at old
// when it takes the update (git's receive-pack checks the old value under
// its ref lock), so a push never overwrites another writer's.
func (r *Remote) upload(ctx context.Context, sess transport.ReceivePackSession, ar *packp.AdvRefs, old, new plumbing.Hash, objs *memory.ObjectStorage, hashes []plumbing.Hash) error {
	var caps *capability.List
	if ar != nil {
		caps = ar.Capabilities
	} else {
		caps = capability.NewList()
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(caps)
	req.Commands = []*packp.Command{{Name: r.branch, Old: old, New: new}}
	pr, pw := io.Pipe()
	req.Packfile = pr
	done := make(chan error, 1)
	go func() {
		enc := packfile.NewEncoder(pw, objs, !caps.Supports(capability.OFSDelta))
		_, err := enc.Encode(hashes, 0) // no delta search: a change's objects are few
		done <- pw.CloseWithError(err)
	}()
	rs, err := sess.ReceivePack(ctx, req)
	pr.Close()
	if encErr := <-done; err == nil && encErr != nil {
		err = encErr
	}
	if err != nil {
		return err
	}
	if rs != nil {
		if err := rs.Error(); err != nil {
			return &refusedPush{msg: err.Error()}
		}
	}
	return nil
}

// refusedPush is the remote's refusal of a ref update.
type refusedPush struct{ msg string }

func (e *refusedPush) Error() string {
	return "the remote refused the update (" + strings.TrimSpace(e.msg) + ")"
}
