package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// Logger receives Run's progress and failure lines. *testing.T, *testing.B
// and a wrapper around log.Printf satisfy it.
type Logger interface {
	Logf(format string, args ...any)
}

// Plan describes a crash suite for Run: how to start the binary, drive it,
// recover it and check it, and how many times to crash it.
type Plan struct {
	// Iterations is the number of crashes to attempt. It is raised to
	// len(Failpoints) so that every point is crashed once.
	Iterations int

	// Failpoints are crashed in turn, one per iteration, each armed as
	// "name=kill" (the first hit kills). The iterations after them kill the
	// process after a random delay instead. Failpoints lists the toolkit's
	// names and the phases that reach them; FailpointsIn(Phases...) gives
	// every name this plan's phases reach. A failpoint fires when it kills
	// the Process Start returned, or any other process that the plan's
	// functions start with crashtest.Start, the ctx Run gave them and the
	// failpoint armed (PhaseAttach's second process).
	Failpoints []string

	// Phases are the parts of a server's life the Plan's functions can set
	// up, as Iteration.Phase asks (see Phase). Each failpoint iteration
	// runs in the first phase that reaches its failpoint and that Phases
	// lists; a failpoint none of them reaches makes Run return an
	// *UnreachableError. Random-kill iterations take the phases in turn.
	// Empty, every iteration's phase is its failpoint's first (random
	// kills have none), Run sets up nothing for it (no preparing run for
	// PhaseRecovery), and the plan's functions may ignore it.
	Phases []Phase

	// Seed drives every random choice. 0 means SeedFromEnv.
	Seed int64

	// MinDelay and MaxDelay bound the delay, counted from Start's return,
	// after which a random-kill iteration SIGKILLs the process. Both 0
	// means 0 to 100ms.
	MinDelay, MaxDelay time.Duration

	// Timeout bounds one iteration: start, drive, restart and check. An
	// iteration that runs out is a violation. 0 means one minute; Run
	// refuses a negative Timeout, as it does a negative delay.
	Timeout time.Duration

	// MaxViolations stops the suite once it has found this many
	// violations. 0 runs every iteration.
	MaxViolations int

	// Start starts the binary for iteration it, with it.Failpoints armed
	// (pass it as Cmd.Failpoints) and ctx passed to crashtest.Start.
	// Required. An error is a violation.
	Start func(ctx context.Context, it *Iteration) (*Process, error)

	// Drive gives the process work until it dies or the work is done, and
	// records what the process acknowledged for Check. A process dying
	// under Drive is the point of the exercise, not an error: Drive returns
	// an error only for a broken invariant it saw, which is a violation.
	// The process, if it still runs when Drive returns, is killed. Nil
	// waits for the process to die; a Plan whose Phases list PhaseRecovery
	// needs a Drive, to make the change its preparing runs crash in. Drive
	// may start more processes with crashtest.Start and ctx: Run kills
	// them, if they still run, when the iteration ends, after Check. Until
	// then they are the crash's survivors, which Restart and Check may
	// look at (an attached process that must take over, or leave once
	// its client goes); kill them in Drive when Restart should find the
	// home with no process of the iteration on it.
	Drive func(ctx context.Context, it *Iteration, p *Process) error

	// Restart runs after each crash: typically it starts the binary again
	// without failpoints and lets it recover. An error is a violation and
	// skips Check. Nil skips the step.
	Restart func(ctx context.Context, it *Iteration) error

	// Check verifies the invariants after the crash and the restart. Each
	// error it returns is a violation; errors joined with errors.Join are
	// reported one by one. Nil skips the step.
	Check func(ctx context.Context, it *Iteration) error
}

// Iteration describes one crash of a suite to the Plan's functions.
type Iteration struct {
	N          int           // 0-based number of the iteration
	Seed       int64         // the suite's seed
	Failpoint  string        // the point armed with kill; "" for a random kill
	Failpoints string        // the MCPKEEP_FAILPOINTS value to start with
	KillAfter  time.Duration // random kill: delay after Start returns; 0 with a failpoint
	// Phase is the part of a server's life the iteration crashes in: the
	// Plan's functions set it up (a new home for PhaseInstall, see Phase).
	// "" when Plan.Phases is empty and the iteration is a random kill.
	Phase Phase
	// Prepare marks the run Run makes before a PhaseRecovery iteration:
	// Failpoints interrupts the first change, so Drive must make one. Run
	// neither restarts nor checks after it, and a violation its Drive
	// returns counts for the iteration.
	Prepare bool
	// Schedule is the iteration's own source of random choices, drawn
	// from Seed and N, for the workload Drive generates.
	Schedule *Schedule
}

// Violation is a broken invariant found in one iteration of a suite. Its
// message names the iteration, the crash and the seed that replays it.
type Violation struct {
	Iteration int           // the iteration's number, from 0
	Failpoint string        // the point that was armed; "" for a random kill
	KillAfter time.Duration // the random kill's delay
	Seed      int64         // the suite's seed: Plan.Seed replays the run
	Err       error         // what the failed check returned
}

// Error names the iteration, the crash and the seed that replays it.
func (v *Violation) Error() string {
	crash := "failpoint " + v.Failpoint
	if v.Failpoint == "" {
		crash = "random kill after " + v.KillAfter.String()
	}
	return fmt.Sprintf("crashtest: iteration %d (%s), seed %d: %v", v.Iteration, crash, v.Seed, v.Err)
}

// Unwrap returns the failed check's error.
func (v *Violation) Unwrap() error { return v.Err }

// Summary is the outcome of Run.
type Summary struct {
	Iterations int          // iterations run
	Crashes    int          // iterations whose process died by SIGKILL
	Failpoints int          // distinct failpoints that fired
	Unfired    []string     // armed failpoints the workload never reached
	Violations []*Violation // the broken invariants, in iteration order
	Seed       int64        // the seed the run used; Plan.Seed replays it
}

// String returns the one-line summary
// "crash suite: N crashes, K failpoints, V violations, seed S".
func (s Summary) String() string {
	return fmt.Sprintf("crash suite: %d crashes, %d failpoints, %d violations, seed %d",
		s.Crashes, s.Failpoints, len(s.Violations), s.Seed)
}

// Err returns the violations joined into one error, or nil when there are
// none.
func (s Summary) Err() error {
	errs := make([]error, len(s.Violations))
	for i, v := range s.Violations {
		errs[i] = v
	}
	return errors.Join(errs...)
}

// Run runs the crash suite plan describes. Each iteration starts the
// binary with one failpoint armed to kill (each of plan.Failpoints in turn)
// or with a random kill scheduled, drives it, kills whatever still runs,
// restarts it and checks the invariants. It collects every violation
// rather than stopping at the first, logs each with the seed that replays
// the run, and logs the summary line at the end. log may be nil.
//
// Run returns an error, with the summary so far, only for an invalid plan
// or when ctx ends; violations are in the summary.
func Run(ctx context.Context, log Logger, plan Plan) (Summary, error) {
	if log == nil {
		log = discard{}
	}
	if plan.Start == nil {
		return Summary{}, errors.New("crashtest: Plan.Start is nil: give Run a function that starts the binary")
	}
	for _, p := range plan.Phases {
		if !slices.Contains(Phases(), p) {
			return Summary{}, fmt.Errorf("crashtest: Plan.Phases: unknown phase %q (see Phases)", p)
		}
	}
	if plan.Drive == nil && slices.Contains(plan.Phases, PhaseRecovery) {
		return Summary{}, errors.New("crashtest: Plan.Phases lists PhaseRecovery, and Plan.Drive is nil: " +
			"the run before each recovery iteration (Iteration.Prepare) needs a Drive that makes a change for it to crash in, " +
			"or it waits out Plan.Timeout (see PhaseRecovery)")
	}
	for _, name := range plan.Failpoints {
		if _, err := failpoint.Parse(name + "=kill"); err != nil {
			return Summary{}, fmt.Errorf("crashtest: Plan.Failpoints: %w", err)
		}
		if _, err := phaseFor(name, plan.Phases); err != nil {
			return Summary{}, err
		}
	}
	if plan.MinDelay < 0 || plan.MaxDelay < plan.MinDelay {
		return Summary{}, fmt.Errorf("crashtest: Plan delays %v..%v: want 0 <= MinDelay <= MaxDelay", plan.MinDelay, plan.MaxDelay)
	}
	if plan.Timeout < 0 {
		return Summary{}, fmt.Errorf("crashtest: Plan.Timeout %v: want 0 (one minute) or more", plan.Timeout)
	}
	if plan.MinDelay == 0 && plan.MaxDelay == 0 {
		plan.MaxDelay = 100 * time.Millisecond
	}
	if plan.Timeout == 0 {
		plan.Timeout = time.Minute
	}
	plan.Iterations = max(plan.Iterations, len(plan.Failpoints))
	if plan.Iterations == 0 {
		return Summary{}, errors.New("crashtest: Plan has no Iterations and no Failpoints: nothing to crash")
	}
	seed := plan.Seed
	if seed == 0 {
		var err error
		if seed, err = SeedFromEnv(); err != nil {
			return Summary{}, err
		}
	}

	sum := Summary{Seed: seed}
	sched := NewSchedule(seed)
	fired := make(map[string]bool)
	armedIn := make(map[string]*Iteration) // the iteration each failpoint was armed in
	prepared := make(map[string]bool)      // its preparing run crashed in a change
	log.Logf("crash suite: %d iterations, %d failpoints, seed %d (%s=%d replays it)",
		plan.Iterations, len(plan.Failpoints), seed, SeedEnvVar, seed)
	for n := range plan.Iterations {
		if err := ctx.Err(); err != nil {
			return finish(log, sum, &plan, fired, armedIn, prepared), err
		}
		it := &Iteration{N: n, Seed: seed, Schedule: NewSchedule(iterationSeed(seed, n))}
		if n < len(plan.Failpoints) {
			it.Failpoint = plan.Failpoints[n]
			it.Failpoints = it.Failpoint + "=kill"
			it.Phase, _ = phaseFor(it.Failpoint, plan.Phases) // checked above
			armedIn[it.Failpoint] = it
		} else {
			it.KillAfter = sched.Delay(plan.MinDelay, plan.MaxDelay)
			if len(plan.Phases) > 0 {
				it.Phase = plan.Phases[(n-len(plan.Failpoints))%len(plan.Phases)]
			}
		}
		var procs started
		crashed, self, prep, errs := runOne(ctx, &plan, it, &procs)
		procs.end()
		if err := ctx.Err(); err != nil {
			return finish(log, sum, &plan, fired, armedIn, prepared), err // its findings are the cancellation's
		}
		if prep && it.Failpoint != "" {
			prepared[it.Failpoint] = true
		}
		if it.Failpoint != "" && procs.fired(it.Failpoint) {
			// One of the iteration's processes crashed at it: one
			// Drive started, such as PhaseAttach's second one.
			crashed, self = true, true
		}
		sum.Iterations++
		if crashed {
			sum.Crashes++
		}
		if self && it.Failpoint != "" {
			fired[it.Failpoint] = true
		}
		for _, err := range errs {
			v := &Violation{Iteration: n, Failpoint: it.Failpoint, KillAfter: it.KillAfter, Seed: seed, Err: err}
			sum.Violations = append(sum.Violations, v)
			log.Logf("%v\n\treplay with %s=%d", v, SeedEnvVar, seed)
		}
		if plan.MaxViolations > 0 && len(sum.Violations) >= plan.MaxViolations {
			log.Logf("crash suite: stopping after %d violations (Plan.MaxViolations)", len(sum.Violations))
			break
		}
	}
	return finish(log, sum, &plan, fired, armedIn, prepared), nil
}

// finish counts the failpoints that fired, and logs, for each armed one
// that did not, what the plan lacks for it.
func finish(log Logger, sum Summary, plan *Plan, fired map[string]bool, armedIn map[string]*Iteration, prepared map[string]bool) Summary {
	sum.Failpoints = len(fired)
	var unfired []*Iteration
	for name, it := range armedIn {
		if !fired[name] && it.N < sum.Iterations {
			unfired = append(unfired, it)
		}
	}
	slices.SortFunc(unfired, func(a, b *Iteration) int { return a.N - b.N })
	for _, it := range unfired {
		sum.Unfired = append(sum.Unfired, it.Failpoint)
		log.Logf("crash suite: failpoint %s never fired (iteration %d, phase %s): %s",
			it.Failpoint, it.N, it.Phase, hint(it.Failpoint, it.Phase, slices.Contains(plan.Phases, it.Phase), prepared[it.Failpoint]))
	}
	log.Logf("%v", sum)
	return sum
}

// runOne runs one iteration and reports whether the process Start
// returned died by SIGKILL, whether it killed itself (its failpoint
// fired), whether the run preparing a PhaseRecovery iteration crashed in a
// change, and the violations found. procs records the processes started
// with the iteration's context after the preparing run.
func runOne(ctx context.Context, plan *Plan, it *Iteration, procs *started) (crashed, self, prepared bool, errs []error) {
	ctx, cancel := context.WithTimeout(ctx, plan.Timeout)
	defer cancel()
	// timedOut reports whether the iteration ran out of Plan.Timeout, and
	// says so once, with where it was, in errs.
	timedOut := func(where string) bool {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			errs = append(errs, fmt.Errorf("iteration ran out of Plan.Timeout (%v)%s", plan.Timeout, where))
			return true
		}
		return false
	}

	if it.Phase == PhaseRecovery && slices.Contains(plan.Phases, PhaseRecovery) {
		var err error
		prepared, err = prepare(ctx, plan, it)
		if timedOut(" in the run preparing it (Iteration.Prepare), which ends when a change crashes it: its Drive must make a change") {
			return false, false, prepared, errs
		}
		if err != nil {
			return false, false, prepared, append(errs, err)
		}
	}
	ctx = withStarted(ctx, procs)
	p, err := plan.Start(ctx, it)
	if err != nil {
		if timedOut(" in Start") {
			return false, false, prepared, errs
		}
		return false, false, prepared, []error{fmt.Errorf("start: %w", err)}
	}
	if p == nil {
		return false, false, prepared, []error{errors.New("start: Plan.Start returned no Process and no error")}
	}
	if it.Failpoint == "" {
		timer := time.AfterFunc(it.KillAfter, func() { _ = p.signal() })
		defer timer.Stop()
	}
	if plan.Drive != nil {
		if err := plan.Drive(ctx, it, p); err != nil {
			errs = append(errs, fmt.Errorf("drive: %w", err))
		}
	} else {
		select {
		case <-p.Done():
		case <-ctx.Done():
		}
	}
	if err := p.Kill(); err != nil {
		errs = append(errs, err)
	}
	werr := p.Wait()
	if timedOut("") {
		return p.Killed(), false, prepared, errs
	}
	var ee *ExitError
	switch {
	case p.Killed():
		crashed, self = true, p.killedBySelf()
	case werr == nil:
		// It finished its work before the kill: not a crash, not a fault.
	case errors.As(werr, &ee):
		errs = append(errs, fmt.Errorf("the process died on its own before the kill: %w", werr))
	default:
		errs = append(errs, werr)
	}

	if plan.Restart != nil {
		if err := plan.Restart(ctx, it); err != nil {
			if !timedOut("") {
				errs = append(errs, fmt.Errorf("restart: %w", err))
			}
			return crashed, self, prepared, errs
		}
	}
	if plan.Check != nil {
		err := plan.Check(ctx, it)
		if timedOut("") {
			return crashed, self, prepared, errs
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok && reflect.TypeOf(err) == joinType {
			for _, e := range j.Unwrap() {
				errs = append(errs, fmt.Errorf("check: %w", e))
			}
		} else if err != nil {
			errs = append(errs, fmt.Errorf("check: %w", err))
		}
	}
	return crashed, self, prepared, errs
}

// prepare runs the run before a PhaseRecovery iteration: the binary,
// started and driven as usual, with a failpoint that kills it in the
// middle of its first change. It reports whether that kill came; an
// error is a violation Drive found, or a Start that failed.
func prepare(ctx context.Context, plan *Plan, it *Iteration) (bool, error) {
	prep := *it
	prep.Prepare, prep.Failpoint, prep.Failpoints, prep.KillAfter = true, "", failpoint.InterruptChange+"=kill", 0
	p, err := plan.Start(ctx, &prep)
	if err != nil {
		return false, fmt.Errorf("prepare (the run that crashes a change for recovery): start: %w", err)
	}
	if p == nil {
		return false, errors.New("prepare: start: Plan.Start returned no Process and no error")
	}
	var derr error
	if plan.Drive != nil {
		if err := plan.Drive(ctx, &prep, p); err != nil {
			derr = fmt.Errorf("prepare (the run that crashes a change for recovery): drive: %w", err)
		}
	} else {
		select {
		case <-p.Done():
		case <-ctx.Done():
		}
	}
	_ = p.Kill()
	_ = p.Wait()
	return p.killedBySelf(), derr
}

// killedBySelf reports whether the process died by a SIGKILL that Kill or
// the context did not send: an armed failpoint's kill action.
func (p *Process) killedBySelf() bool { return p.Killed() && !p.sentKill.Load() }

// joinType is the type of errors.Join's result, whose parts Check reports
// one by one; other errors with several causes stay whole.
var joinType = reflect.TypeOf(errors.Join(errors.New("")))

// iterationSeed derives the seed of iteration n's own schedule, so that the
// choices a Drive makes in one iteration do not shift those of the next.
func iterationSeed(seed int64, n int) int64 {
	return int64(rand.New(rand.NewPCG(uint64(seed), uint64(n)+1)).Uint64())
}

type discard struct{}

func (discard) Logf(string, ...any) {}
