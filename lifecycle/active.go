package lifecycle

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// CodeStandby is the JSON-RPC error code a client of a standby gets for a
// request it may not serve (every request but initialize, ping,
// server/discover, logging/setLevel and notifications): this server is
// not the active writer of a home shared by several hosts. The error's
// data is {"role":"standby","active":URL}, URL "" when no writer is known.
// Over HTTP a standby answers 503 before the request reaches MCP.
const CodeStandby = -32011

// ActiveHeader is the HTTP response header in which a standby's 503
// answer names the active writer's URL; the body says it too.
const ActiveHeader = mcpserve.ActiveHeader

// Timings of the election loop.
const (
	// leaderPoll is how often the active writer's published value is
	// read, for the role and the URL a standby refers clients to.
	leaderPoll = time.Second
	// checkTimeout bounds one confirmation of the term with the
	// Elector's store, before a change and before its acknowledgement.
	checkTimeout = time.Second
	// resignTimeout bounds resigning at a clean stop.
	resignTimeout = 2 * time.Second
	// campaignRetry is the first wait after a failed campaign; it doubles
	// up to campaignRetryMax.
	campaignRetry    = 100 * time.Millisecond
	campaignRetryMax = 5 * time.Second
	// maxAdvertised bounds the URL taken from the store (it is shown to
	// clients).
	maxAdvertised = 512
)

// writerInfo is what the active writer publishes through the Elector.
type writerInfo struct {
	URL  string `json:"url,omitempty"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
}

// election is this server's part in electing the home's active writer
// among hosts (Options.Elector): it campaigns, holds the term, knows the
// role and the active writer, and fences changes.
type election struct {
	el     Elector
	value  string // the JSON of me, published while active
	me     writerInfo
	log    *slog.Logger
	before func(context.Context) error // run each time it is elected, before serving as active
	record func(statefile.Cluster)     // the role changed: write it down

	kick chan struct{} // read the leader now

	mu        sync.Mutex
	term      Term // the term held, nil when none
	taking    Term // the term being taken up (before runs), nil when none
	wasActive bool // this server was the writer and has seen no other since
	leader    writerInfo
	cluster   statefile.Cluster // the role as last recorded
}

func newElection(el Elector, me writerInfo, log *slog.Logger, before func(context.Context) error, record func(statefile.Cluster)) *election {
	value, _ := json.Marshal(me) // strings and an int: cannot fail
	e := &election{el: el, value: string(value), me: me, log: log, before: before, record: record, kick: make(chan struct{}, 1)}
	e.cluster = statefile.Cluster{Role: statefile.RoleStandby, Since: time.Now().UTC().Truncate(time.Millisecond)}
	return e
}

// status is the role and the active writer now. The role is computed
// afresh: a process that was stopped longer than its lease sees at once
// that its term no longer holds.
func (e *election) status() statefile.Cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statusLocked()
}

func (e *election) statusLocked() statefile.Cluster {
	c := statefile.Cluster{Role: statefile.RoleStandby, Active: e.leader.URL, ActiveHost: e.leader.Host, Since: e.cluster.Since}
	switch {
	case e.term != nil && e.term.Held():
		c.Role, c.Active, c.ActiveHost, c.Term = statefile.RoleActive, e.me.URL, e.me.Host, e.term.Token()
	case e.wasActive: // no other writer seen since: none known
		c.Role, c.Active, c.ActiveHost = statefile.RoleReadOnly, "", ""
	}
	if c.Role != e.cluster.Role {
		c.Since = time.Now().UTC().Truncate(time.Millisecond)
	}
	return c
}

// writing reports whether this server may move the shared history (push
// to the git remote): it holds a term, or is taking one up, and the term
// is sure to hold still. A standby, and a writer whose lease may have
// expired, only fetch.
func (e *election) writing() bool {
	e.mu.Lock()
	t := e.term
	if t == nil {
		t = e.taking
	}
	e.mu.Unlock()
	return t != nil && t.Held()
}

// standby reports whether MCP requests are refused, and the active
// writer's URL to refer them to.
func (e *election) standby() (bool, string) {
	c := e.status()
	return c.Role == statefile.RoleStandby, c.Active
}

// beforeChange fences a change before it is made: the term must hold,
// and the store must confirm it.
func (e *election) beforeChange(ctx context.Context, change string) error {
	return e.confirm(ctx, change, "")
}

// beforeAck fences the acknowledgement of a change made as commit: the
// term must still hold once the change is durable. If it does not, the
// change is not acknowledged.
func (e *election) beforeAck(ctx context.Context, change, commit string) error {
	if err := failpoint.Hit("lifecycle.before-ack"); err != nil {
		return err
	}
	// The change is made: a client that gave up waiting must not turn a
	// confirmable change into an unacknowledged one.
	return e.confirm(context.WithoutCancel(ctx), change, commit)
}

func (e *election) confirm(ctx context.Context, change, commit string) error {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	var err error
	if t != nil { // Check answers at once, without asking, when the term does not hold
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		err = t.Check(cctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	c := e.status()
	if commit == "" && c.Role == statefile.RoleActive {
		c.Role = statefile.RoleReadOnly // Check failed: this server cannot act as the writer now
	}
	if err != nil {
		e.log.Warn("the writer's lease could not be confirmed; the change is refused", "change", change, "commit", commit, "err", err)
		e.poke()
	}
	return &NotActiveError{Change: change, Role: c.Role, Active: c.Active, Commit: commit, Err: err}
}

// poke asks the leader loop to look again now.
func (e *election) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// run campaigns until ctx ends: elected, it runs before, then serves as
// the active writer until its term ends, then campaigns again. Beside it a
// loop reads the active writer and records role changes. It leaves a term
// it holds when ctx ends to resign, so that the shutdown can still commit
// as the writer.
func (e *election) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { e.watch(ctx) })
	wait := campaignRetry
	for ctx.Err() == nil {
		t, err := e.el.Campaign(ctx, e.value)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("campaign for the writer's lease failed; retrying", "in", wait, "err", err)
				sleep(ctx, wait)
				wait = min(2*wait, campaignRetryMax)
			}
			continue
		}
		if err := e.takeOffice(ctx, t); err != nil {
			if ctx.Err() == nil {
				e.log.Error("elected, but could not start as the active writer; resigning", "in", wait, "err", err)
			}
			e.resign(t)
			sleep(ctx, wait)
			wait = min(2*wait, campaignRetryMax)
			continue
		}
		wait = campaignRetry
		select {
		case <-t.Done():
			e.mu.Lock()
			e.term = nil
			e.mu.Unlock()
			e.log.Warn("lost the writer's lease: changes are refused until this server is elected again", "term", t.Token())
			e.poke()
		case <-ctx.Done():
		}
	}
}

// takeOffice makes an elected server the active writer: it runs before
// (catching up with what other writers did), confirms the term still holds,
// and only then lets changes through.
func (e *election) takeOffice(ctx context.Context, t Term) error {
	e.log.Info("elected the home's writer; catching up before serving as active", "term", t.Token())
	e.mu.Lock()
	e.taking = t // the catch-up may merge, and push the merge
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.taking = nil
		e.mu.Unlock()
	}()
	if e.before != nil {
		if err := e.before(ctx); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := t.Check(cctx); err != nil {
		return err
	}
	e.mu.Lock()
	e.term, e.wasActive, e.leader = t, true, e.me
	e.mu.Unlock()
	e.log.Info("serving as the active writer", "term", t.Token(), "url", e.me.URL)
	e.poke()
	return nil
}

// resign gives up t, bounded by resignTimeout.
func (e *election) resign(t Term) {
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	if err := t.Resign(ctx); err != nil {
		e.log.Warn("could not resign the writer's lease; the others wait for it to expire", "err", err)
	}
}

// stop resigns the term held, if any, so that a standby takes over at
// once. It is the last step of a clean stop, after the shutdown's commit;
// Run closes the Elector.
func (e *election) stop() {
	e.mu.Lock()
	t := e.term
	e.term = nil
	e.mu.Unlock()
	if t != nil {
		if err := failpoint.Hit("lifecycle.before-resign"); err != nil {
			e.log.Warn("resign", "err", err) // an injected error: resign all the same
		}
		e.resign(t)
		e.log.Info("resigned the writer's lease", "term", t.Token())
	}
}

// watch reads the active writer every leaderPoll, and at once when poked,
// and records every change of role or of active writer.
func (e *election) watch(ctx context.Context) {
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, leaderPoll)
		value, err := e.el.Leader(lctx)
		cancel()
		e.mu.Lock()
		if err == nil {
			e.setLeader(value)
		}
		c := e.statusLocked()
		changed := c.Role != e.cluster.Role || c.Active != e.cluster.Active || c.Term != e.cluster.Term
		if changed {
			e.cluster = c
		}
		e.mu.Unlock()
		if changed {
			e.log.Info("role", "role", c.Role, "active", c.Active, "active_host", c.ActiveHost, "term", c.Term)
			e.record(c)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.kick:
		}
	}
}

// setLeader takes the active writer's published value (e.mu held). A
// value that is not this server's own means another writer: this server
// is then a standby, not a writer cut off. Only an http(s) URL of bounded
// length is kept: the value comes from the store, and the URL is shown to
// clients.
func (e *election) setLeader(value string) {
	if value == "" {
		e.leader = writerInfo{}
		return
	}
	if value == e.value {
		return
	}
	e.wasActive = false
	var w writerInfo
	if json.Unmarshal([]byte(value), &w) != nil {
		w = writerInfo{}
	}
	if u, err := url.Parse(w.URL); err != nil || len(w.URL) > maxAdvertised || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		w.URL = ""
	}
	if len(w.Host) > maxAdvertised {
		w.Host = ""
	}
	e.leader = w
}

// middleware refuses, on a standby, every request but those that set a
// session up: the stdio client and attached clients get a JSON-RPC error
// with the active writer's URL (HTTP clients are refused earlier, with
// 503).
func (e *election) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if standbyServes(method) {
			return next(ctx, method, req)
		}
		if standby, active := e.standby(); standby {
			data, _ := json.Marshal(map[string]string{"role": statefile.RoleStandby, "active": active})
			msg := "this server is a standby, not the active writer of the home"
			if active != "" {
				msg += "; the active writer serves at " + active
			} else {
				msg += "; no active writer is elected yet: retry shortly"
			}
			return nil, &jsonrpc.Error{Code: CodeStandby, Message: msg, Data: data}
		}
		return next(ctx, method, req)
	}
}

// standbyServes reports whether a standby serves method: what sets a
// session up, and notifications.
func standbyServes(method string) bool {
	switch method {
	case "initialize", "ping", "server/discover", "logging/setLevel":
		return true
	}
	return len(method) > len("notifications/") && method[:len("notifications/")] == "notifications/"
}

// sleep waits for d or ctx.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// hostname is this machine's host name, "" if unknown.
func hostname() string {
	name, _ := os.Hostname()
	return name
}

// advertised is the URL the writer publishes: Options.AdvertiseURL, or
// the HTTP URL it serves, with this machine's host name in place of an
// unspecified address (0.0.0.0, ::); "" without HTTP.
func advertised(asked string, st *statefile.HTTP) string {
	if asked != "" || st == nil {
		return asked
	}
	switch st.Host {
	case "0.0.0.0", "::":
		if name, err := os.Hostname(); err == nil && name != "" {
			return statefile.URL(name, st.Port)
		}
	}
	return st.URL
}
