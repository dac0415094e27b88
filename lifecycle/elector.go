package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpkeep/mcpkeep/statefile"
)

// An Elector chooses the one active writer among the servers that serve
// copies of one home on several hosts (Options.Elector), by a lease in a
// store of their own, such as etcd (package lifecycle/etcdlock). Within a
// host the home lock still decides which process takes part.
//
// The harness calls Campaign again each time a term ends, and Close once,
// when Run returns. An Elector must be safe for concurrent use.
type Elector interface {
	// Campaign blocks until this server is elected, or ctx ends, and
	// returns its term. While it waits, it stays a candidate: the lease
	// it campaigns with is kept alive. It publishes value for Leader to
	// return while this server is the writer.
	Campaign(ctx context.Context, value string) (Term, error)
	// Leader returns the value the active writer published, or "" when
	// none is elected.
	Leader(ctx context.Context) (string, error)
	// Close ends the Elector's terms and campaigns and releases its
	// connections. Call it once, after the last term has been resigned
	// or has ended.
	Close() error
}

// A Term is one spell of a server as the active writer: it lasts while
// the lease it was elected with is alive and its claim is the first.
type Term interface {
	// Held reports, without asking anyone, whether the term is sure to
	// hold still: the lease cannot have expired yet. It must be cheap; it
	// is asked on every request.
	Held() bool
	// Check confirms with the store that the term still holds. The
	// harness calls it before each change and again before the change is
	// acknowledged. It returns an error when the store says the term is
	// over, or cannot be asked in time; when Held is false it returns at
	// once, without asking, an error that says why.
	Check(ctx context.Context) error
	// Done is closed when the term has ended for good: the lease expired
	// or was revoked, the claim was deleted, or the term was resigned. A
	// term whose lease cannot be renewed for a while is not Held, but not
	// Done either: it holds again if the lease turns out to be alive.
	Done() <-chan struct{}
	// Resign ends the term at once, so that another server is elected
	// without waiting for the lease to expire.
	Resign(ctx context.Context) error
	// Token is the term's fencing token: a number that grows from one
	// term to the next (etcd: the create revision of the claim).
	Token() int64
}

// ErrNotActive: a change was refused, or not acknowledged, because this
// server is not the active writer of a home shared by several hosts
// (Options.Elector).
var ErrNotActive = errors.New("lifecycle: this server is not the active writer")

// NotActiveError says why a change was refused, or why a change that was
// made here is not acknowledged, and where the active writer is. It
// matches ErrNotActive.
type NotActiveError struct {
	// Change is the change's commit message.
	Change string
	// Role is this server's role (statefile.RoleStandby or RoleReadOnly;
	// RoleActive when the term was lost during the change).
	Role string
	// Active is the URL the active writer advertises, "" when none is
	// known.
	Active string
	// Commit is the commit the change made here when it was made but could
	// not be acknowledged: its writer lost the lease before answering.
	// The active writer's history decides whether it stays. "" when the
	// change was refused before it was made.
	Commit string
	// Err is why: the lease lost, the store not answering.
	Err error
}

// Error says what was refused or not acknowledged, why, and where to send
// the change instead.
func (e *NotActiveError) Error() string {
	var b strings.Builder
	if e.Commit != "" {
		fmt.Fprintf(&b, "lifecycle: %q was committed here as %s but is not acknowledged: this server lost the writer's lease before it could answer", e.Change, e.Commit)
	} else {
		fmt.Fprintf(&b, "lifecycle: %q refused: this server is not the active writer of the home", e.Change)
		switch e.Role {
		case statefile.RoleStandby:
			b.WriteString(" (it is a standby)")
		case statefile.RoleReadOnly:
			b.WriteString(" (it lost the writer's lease and serves reads only until it is the writer again)")
		}
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	switch {
	case e.Active != "":
		fmt.Fprintf(&b, "; send changes to the active writer at %s", e.Active)
	default:
		b.WriteString("; no active writer is known: retry once one is elected (see /healthz or mcpkeep status)")
	}
	return b.String()
}

// Unwrap returns ErrNotActive and the cause.
func (e *NotActiveError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNotActive}
	}
	return []error{ErrNotActive, e.Err}
}
