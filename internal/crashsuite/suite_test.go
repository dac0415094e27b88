package crashsuite_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
)

// crashesEnv is the environment variable that sets the number of crashes.
const crashesEnv = "MCPKEEP_CRASHES"

// count returns the number in the environment variable env, or def, or
// short under -short.
func count(t *testing.T, env string, def, short int) int {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s=%q: want a whole number", env, v)
		require.Positive(t, n, "%s=%q: want at least 1", env, v)
		return n
	}
	if testing.Short() {
		return short
	}
	return def
}

// TestCrashSuite crashes helios at every failpoint, then at random, and
// checks the invariants after every crash. See the package documentation.
func TestCrashSuite(t *testing.T) {
	s := newSuite(t)
	n := count(t, crashesEnv, 100, 15)
	began := time.Now()
	sum, err := crashtest.Run(t.Context(), t, s.plan(n))
	require.NoError(t, err)
	t.Logf("crash suite: %d iterations in %v; random kills landed: %s", sum.Iterations, time.Since(began).Round(time.Second), s.landed())

	assert.NoError(t, sum.Err())
	// The coverage test: a failpoint in failpoint.Names that the suite
	// does not crash fails the build's tests.
	assert.Empty(t, sum.Unfired, "failpoints armed but never fired: give them a workload in reach()")
	assert.Equal(t, len(s.names()), sum.Failpoints, "every failpoint in failpoint.Names must fire")
}

// TestPlanArmsEveryFailpoint keeps the plan honest without running it:
// every name in failpoint.Names is armed, and only those.
func TestPlanArmsEveryFailpoint(t *testing.T) {
	s := &suite{}
	for _, n := range []int{1, 100, 2000} {
		plan := s.plan(n)
		armed := map[string]bool{}
		for _, name := range plan.Failpoints {
			armed[name] = true
		}
		assert.ElementsMatch(t, suitePoints(), slices.Collect(maps.Keys(armed)), "crashes %d", n)
		assert.GreaterOrEqual(t, max(n, len(plan.Failpoints)), len(suitePoints()))
	}
}

// suitePoints is failpoint.Names but the points no binary reaches
// (failpoint.Unreached): the points the suite crashes helios at.
func suitePoints() []string {
	return slices.DeleteFunc(slices.Clone(failpoint.Names), func(n string) bool {
		return slices.Contains(failpoint.Unreached, n)
	})
}

// A workload is the home a failpoint iteration crashes helios on.
type workload int

const (
	onMain     workload = iota // the suite's home, installed and clean
	onFresh                    // a fresh home: the server installs it
	onPending                  // the suite's home after a crash mid-update: start-up rolls it forward
	onPacked                   // a home past the pack threshold: the first commit packs
	onUpgrade                  // a helios home heliosnext upgrades to schema 2
	onAttached                 // the suite's home, a writer and a process attached to it
	onElected                  // the suite's home, its writer elected through etcd
	onRemote                   // a home replicated to a git remote in sync mode, whose start merges a conflict
)

func (w workload) String() string {
	return [...]string{"installed home", "fresh home", "interrupted update", "packed home", "upgrade", "attached clients", "elected writer", "git remote"}[w]
}

// reach returns the workloads that reach failpoint name, tried in turn
// round by round, and how many times at least the failpoint-iteration
// workload (start, three or more updates, stdin EOF) hits it, which bounds
// the N of kill@N in rounds after the first. A point not listed here gets
// onMain and one hit; if that does not reach it, TestCrashSuite fails.
func reach(name string) (homes []workload, hits int) {
	switch {
	case isAttachPoint(name):
		return []workload{onAttached}, 1
	case name == "lifecycle.before-ack":
		return []workload{onElected}, 3 // one per update
	case isElectedPoint(name):
		return []workload{onElected}, 1
	case name == "gitstore.before-pack", name == "gitstore.after-pack":
		return []workload{onPacked}, 1
	case name == "gitstore.fetch-after-pack", name == "gitstore.merge-after-tag":
		return []workload{onRemote}, 1 // the start's catch-up: the peer's objects, the conflict
	case name == "gitstore.push-after-remote":
		return []workload{onRemote}, 4 // the merge's push, then one per update
	case name == "bootstrap.before-migration", name == "bootstrap.after-migration":
		return []workload{onUpgrade}, 1
	case name == "bootstrap.before-stamp":
		return []workload{onMain, onFresh, onPending}, 1
	case strings.HasPrefix(name, "bootstrap."):
		return []workload{onFresh}, 1
	case name == "statefile.registry-locked":
		return []workload{onMain}, 2 // register, unregister
	case name == "atomicfile.before-dir-fsync":
		// Counted with a tracing build: an update makes none of its own
		// (gitstore's barriers fsync its directories), the start, the
		// flush and the stop seven on an installed home.
		return []workload{onMain, onFresh, onPending}, 7
	case strings.HasPrefix(name, "atomicfile."):
		return []workload{onMain, onFresh, onPending}, 11 // an installed home's start, three updates, flush, stop
	case name == "gitstore.flush-after-pack", name == "gitstore.flush-after-ref":
		return []workload{onMain, onFresh, onPending}, 1 // the flush at the stop, if none before
	case name == "gitstore.before-ref":
		return []workload{onFresh}, 1 // Commit's ref: the install's commit (the stop's finds nothing to commit)
	case name == "gitstore.before-objects":
		return []workload{onFresh, onMain}, 1 // Commit: the install, and the commit of hand edits at the stop
	case strings.HasPrefix(name, "gitstore."):
		return []workload{onMain, onFresh}, 3 // one Apply per update
	case name == "lifecycle.before-shutdown-commit":
		return []workload{onMain}, 1
	case strings.HasPrefix(name, "lifecycle."):
		return []workload{onMain, onFresh, onPending}, 1
	}
	return []workload{onMain}, 1
}

// Random-kill scenarios and their weights.
var scenarios = []struct {
	name   string
	weight int
}{
	{"stream", 40},    // kill while update_preference calls stream
	{"recovery", 15},  // kill while the start repairs a crash mid-update
	{"bootstrap", 10}, // kill while a fresh home is installed
	{"eof", 10},       // calls in flight, stdin closed: kill during drain and shutdown
	{"sigterm", 10},   // calls in flight, SIGTERM: kill during drain and shutdown
	{"pack", 5},       // kill while the first commit past the threshold packs
	{"upgrade", 10},   // kill while heliosnext migrates a helios home
	// a writer and a process attached to it, both with clients updating:
	{"kill-writer", 10},  // kill the writer: the attached one takes over
	{"kill-attached", 5}, // kill the attached process: the writer goes on
}

func pickScenario(sched *crashtest.Schedule) string {
	total := 0
	for _, s := range scenarios {
		total += s.weight
	}
	n := sched.Intn(total)
	for _, s := range scenarios {
		if n < s.weight {
			return s.name
		}
		n -= s.weight
	}
	panic("unreachable")
}

// holdShutdown arms a sleep in the last step of shutdown (the second
// registry update, the unregister), so a kill sent during shutdown lands
// there rather than after a clean exit: every eof and sigterm iteration is
// a crash.
const holdShutdown = "statefile.registry-locked=sleep(30s)@2"

// prepPoints leave a home with an update interrupted between its two
// barriers, for start-up recovery to roll forward: its journal record is
// durable, and its file is not renamed (after-intent) or renamed but its
// directory not fsynced (before-barrier-2). Both land in the first update
// after a start. prepCrash checks that the journal holds the record.
var prepPoints = []string{"gitstore.after-intent=kill", "gitstore.before-barrier-2=kill"}

// sentUpdate is an update call whose response has not been read yet.
type sentUpdate struct {
	id int64
	u  update
}

// suite is the state of one TestCrashSuite run. Iterations run one at a
// time, so it needs no lock.
type suite struct {
	t        *testing.T
	bin      binSet
	dir      string // homes, the registry
	checker  checker
	main     *home // the home most iterations crash on
	homes    int
	packed   *home        // the template behind onPacked, made once
	remote   *remoteSetup // the workload behind onRemote, made again after a violation
	cur      *iteration
	landings map[string]int
	etcd     *etcdtest.Server // the elected workload's
	noEtcd   bool             // no etcd outside CI: no elected workload
}

// iteration is what the Plan's functions share about the iteration in
// progress.
type iteration struct {
	home     *home
	kind     string // "failpoint" or the random scenario
	scenario string // described for violations
	client   *rpc
	serving  bool // the crashed server answered initialize
	burst    []sentUpdate
	att      *attachment // the attach workload's two processes
	live     []error     // violations the restart's checks found while it served
	failed   bool        // a violation: the next iteration starts on a fresh home
}

func newSuite(t *testing.T) *suite {
	dir := t.TempDir()
	s := &suite{t: t, bin: binaries(t), dir: dir, landings: map[string]int{}}
	s.checker = checker{mcpkeep: s.bin.mcpkeep, registry: dir + "/registry/servers.json"}
	s.main = s.newHome()
	s.startEtcd()
	return s
}

func (s *suite) newHome() *home {
	s.homes++
	return newHome(fmt.Sprintf("%s/home-%d", s.dir, s.homes))
}

// replaceMain makes h the suite's home and removes the old one.
func (s *suite) replaceMain(h *home) {
	if s.main != nil && s.main != h {
		os.RemoveAll(s.main.dir)
	}
	s.main = h
}

func (s *suite) plan(n int) crashtest.Plan {
	rounds := max(1, n/50)
	var fps []string
	for range rounds {
		fps = append(fps, s.names()...)
	}
	return crashtest.Plan{
		Iterations:    n,
		Failpoints:    fps,
		MaxDelay:      120 * time.Millisecond,
		Timeout:       2 * time.Minute,
		MaxViolations: 10,
		Start:         s.start,
		Drive:         s.drive,
		Restart:       s.restart,
		Check:         s.check,
	}
}

// names are the failpoints the suite crashes: suitePoints, but the
// elected workload's outside CI when there is no etcd to run it.
func (s *suite) names() []string {
	if !s.noEtcd {
		return suitePoints()
	}
	return slices.DeleteFunc(suitePoints(), isElectedPoint)
}

func (s *suite) cmd(h *home, failpoints string) crashtest.Cmd {
	path := s.bin.helios
	if h.next {
		path = s.bin.next
	}
	args := []string{"--home", h.dir, "--registry", s.checker.registry}
	if h.remote != "" {
		args = append(args, "--remote", h.remote, "--remote-mode", "sync")
	}
	return crashtest.Cmd{Path: path, Args: args, Failpoints: failpoints}
}

// begin retires the last iteration's extra home and starts a new record.
func (s *suite) begin(it *crashtest.Iteration, kind, scenario string) {
	if it.N > 0 && it.N%100 == 0 {
		s.t.Logf("crash suite: iteration %d", it.N)
	}
	if last := s.cur; last != nil {
		if s.remote != nil && last.home == s.remote.home {
			if last.failed {
				s.remote = nil // the next onRemote iteration starts afresh
			}
		} else if last.home != s.main {
			os.RemoveAll(last.home.dir)
		}
		if last.failed {
			s.t.Logf("crash suite: iteration %d left a violation in %s; going on with a fresh home", it.N-1, s.main.dir)
			s.main = s.newHome()
		}
	}
	s.cur = &iteration{home: s.main, kind: kind, scenario: scenario}
}

func (s *suite) start(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
	var p *crashtest.Process
	var err error
	if it.Failpoint != "" {
		p, err = s.startFailpoint(ctx, it)
	} else {
		p, err = s.startRandom(ctx, it)
	}
	if err != nil {
		s.cur.failed = true
		return nil, fmt.Errorf("%s: %w", s.cur.scenario, err)
	}
	return p, nil
}

func (s *suite) startFailpoint(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
	homes, hits := reach(it.Failpoint)
	round := it.N / len(s.names())
	w := homes[round%len(homes)]
	spec := it.Failpoints
	if round > 0 && hits > 1 {
		spec = fmt.Sprintf("%s=kill@%d", it.Failpoint, 1+it.Schedule.Intn(hits))
	}
	s.begin(it, "failpoint", spec+" on "+w.String())
	var err error
	switch w {
	case onFresh:
		s.replaceMain(s.newHome())
		s.cur.home = s.main
	case onPending:
		err = s.prepCrash(ctx, s.main, it)
	case onPacked:
		err = s.usePacked(ctx)
	case onUpgrade:
		s.cur.home, err = s.upgradeHome()
	case onAttached:
		victim := "attached"
		if armedInWriter(it.Failpoint) {
			victim = "writer"
		}
		return s.startAttached(ctx, spec, victim)
	case onElected:
		return s.launchElected(ctx, it, spec)
	case onRemote:
		err = s.useRemote(ctx)
	}
	if err != nil {
		return nil, err
	}
	return s.launch(ctx, spec)
}

func (s *suite) launch(ctx context.Context, failpoints string) (*crashtest.Process, error) {
	p, err := crashtest.Start(ctx, s.cmd(s.cur.home, failpoints))
	if err != nil {
		return nil, err
	}
	s.cur.client = newRPC(p.Stdin(), p.Stdout())
	return p, nil
}

func (s *suite) startRandom(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
	sc := pickScenario(it.Schedule)
	s.begin(it, sc, "random kill: "+sc)
	var err error
	switch sc {
	case "recovery":
		err = s.prepCrash(ctx, s.main, it)
	case "bootstrap":
		s.replaceMain(s.newHome())
		s.cur.home = s.main
	case "pack":
		err = s.usePacked(ctx)
	case "upgrade":
		s.cur.home, err = s.upgradeHome()
	case "kill-writer":
		return s.startAttached(ctx, "", "writer")
	case "kill-attached":
		return s.startAttached(ctx, "", "attached")
	}
	if err != nil {
		return nil, err
	}
	fps := ""
	if sc == "eof" || sc == "sigterm" {
		fps = holdShutdown
	}
	p, err := s.launch(ctx, fps)
	if err != nil {
		return nil, err
	}
	switch sc {
	case "stream", "pack":
		err = s.handshake()
	case "eof", "sigterm":
		err = s.burstThenStop(p, it, sc)
	}
	if err != nil {
		p.Kill()
		p.Wait()
		return nil, fmt.Errorf("%s: %w; stderr:\n%s", sc, err, p.Stderr())
	}
	return p, nil
}

// handshake runs initialize on the iteration's server.
func (s *suite) handshake() error {
	if err := s.cur.client.initialize(); err != nil {
		return err
	}
	s.cur.serving = true
	return nil
}

// burstThenStop sends a few update calls at once (distinct slots, so their
// order does not matter) and stops the server with them in flight.
func (s *suite) burstThenStop(p *crashtest.Process, it *crashtest.Iteration, how string) error {
	if err := s.handshake(); err != nil {
		return err
	}
	h, c := s.cur.home, s.cur.client
	used := map[string]bool{}
	for range 1 + it.Schedule.Intn(5) {
		u := h.newUpdate(it.Schedule, fmt.Sprintf("i%d", it.N))
		if used[u.slot()] {
			continue
		}
		used[u.slot()] = true
		h.sent(u)
		id, err := c.sendTool("update_preference", u)
		if err != nil {
			return err
		}
		s.cur.burst = append(s.cur.burst, sentUpdate{id, u})
	}
	if how == "eof" {
		return p.Stdin().Close()
	}
	return syscall.Kill(p.Pid(), syscall.SIGTERM)
}
