package crashtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

var errLost = errors.New("acknowledged line lost")

// appendSuite crashes testprog while it appends lines to one file, and
// checks that every line it acknowledged, in every iteration so far, is in
// the file after a restart, and that the restart left no temporary file.
type appendSuite struct {
	dir, file string
	args      []string // extra testprog flags, such as -ack-early
	acked     []string
}

func newAppendSuite(t *testing.T, args ...string) *appendSuite {
	dir := t.TempDir()
	return &appendSuite{dir: dir, file: filepath.Join(dir, "lines"), args: args}
}

func (s *appendSuite) plan() crashtest.Plan {
	return crashtest.Plan{Start: s.start, Drive: s.drive, Restart: s.restart, Check: s.check}
}

func (s *appendSuite) start(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
	return crashtest.Start(ctx, crashtest.Cmd{
		Path:       testprog,
		Args:       append([]string{"-file", s.file}, s.args...),
		Failpoints: it.Failpoints,
	})
}

// drive streams lines until the process dies, recording each acknowledged
// one.
func (s *appendSuite) drive(ctx context.Context, it *crashtest.Iteration, p *crashtest.Process) error {
	out := bufio.NewScanner(p.Stdout())
	for i := 0; ; i++ {
		line := fmt.Sprintf("it%d-%d", it.N, i)
		if _, err := fmt.Fprintln(p.Stdin(), line); err != nil {
			return nil // it died
		}
		if !out.Scan() {
			return nil
		}
		if got := out.Text(); got != "ok "+line {
			return fmt.Errorf("sent %q, acknowledged %q", line, got)
		}
		s.acked = append(s.acked, line)
	}
}

// restart runs testprog without failpoints and with no input: it repairs
// and exits 0, or reports a file it cannot read.
func (s *appendSuite) restart(ctx context.Context, _ *crashtest.Iteration) error {
	p, err := crashtest.Start(ctx, crashtest.Cmd{Path: testprog, Args: []string{"-file", s.file}, Stdin: strings.NewReader("")})
	if err != nil {
		return err
	}
	return p.Wait()
}

func (s *appendSuite) check(context.Context, *crashtest.Iteration) error {
	var errs []error
	data, err := os.ReadFile(s.file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	have := strings.Split(string(data), "\n")
	kept := s.acked[:0]
	for _, line := range s.acked {
		if !slices.Contains(have, line) {
			errs = append(errs, fmt.Errorf("%w: %q is not in %s", errLost, line, s.file))
			continue // reported once
		}
		kept = append(kept, line)
	}
	s.acked = kept
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			errs = append(errs, fmt.Errorf("temporary file %s survived the restart", e.Name()))
		}
	}
	return errors.Join(errs...)
}

// atomicfilePoints are the failpoints testprog reaches on its first write.
func atomicfilePoints() []string {
	var out []string
	for _, name := range failpoint.Names {
		if strings.HasPrefix(name, "atomicfile.") {
			out = append(out, name)
		}
	}
	return out
}

func TestRunKeepsAcknowledgedLines(t *testing.T) {
	s := newAppendSuite(t)
	plan := s.plan()
	plan.Failpoints = atomicfilePoints()
	require.NotEmpty(t, plan.Failpoints)
	plan.Iterations = 40
	plan.MaxDelay = 50 * time.Millisecond
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)

	assert.Empty(t, sum.Violations)
	require.NoError(t, sum.Err())
	assert.Equal(t, 40, sum.Iterations)
	assert.Equal(t, 40, sum.Crashes, "the stream runs until the kill, so every iteration crashes")
	assert.Equal(t, len(plan.Failpoints), sum.Failpoints, "every point fires on the first write")
	assert.Empty(t, sum.Unfired)
	assert.NotEmpty(t, s.acked, "the random kills let some lines through")
	assert.Equal(t, fmt.Sprintf("crash suite: 40 crashes, %d failpoints, 0 violations, seed %d", len(plan.Failpoints), sum.Seed), sum.String())
}

// TestRunReportsViolations breaks the invariant on purpose: with -ack-early
// testprog acknowledges a line before writing it, so a kill before the
// rename loses an acknowledged line. Each such loss must be a violation
// carrying the seed.
func TestRunReportsViolations(t *testing.T) {
	s := newAppendSuite(t, "-ack-early")
	plan := s.plan()
	plan.Seed = 777
	plan.Failpoints = []string{"atomicfile.before-write", "atomicfile.before-rename", "atomicfile.before-dir-fsync"}
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)

	assert.Equal(t, 3, sum.Crashes)
	require.Len(t, sum.Violations, 2, "the kill after the rename loses nothing")
	for i, v := range sum.Violations {
		assert.Equal(t, i, v.Iteration)
		assert.Equal(t, plan.Failpoints[i], v.Failpoint)
		assert.Equal(t, int64(777), v.Seed)
		require.ErrorIs(t, v, errLost)
		assert.Contains(t, v.Error(), "seed 777", "the message lets the run be replayed")
		assert.Contains(t, v.Error(), plan.Failpoints[i])
	}
	require.ErrorIs(t, sum.Err(), errLost)
	assert.Equal(t, "crash suite: 3 crashes, 3 failpoints, 2 violations, seed 777", sum.String())
}

func TestRunSplitsJoinedErrorsAndStops(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	s := newAppendSuite(t)
	plan := s.plan()
	plan.Iterations = 10
	plan.MaxViolations = 3
	plan.Check = func(_ context.Context, it *crashtest.Iteration) error {
		if it.N == 0 {
			return errors.Join(errA, errB) // two violations
		}
		return fmt.Errorf("%w and %w", errA, errB) // one
	}
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Iterations, "stopped at MaxViolations")
	require.Len(t, sum.Violations, 3)
	assert.Equal(t, []int{0, 0, 1}, []int{sum.Violations[0].Iteration, sum.Violations[1].Iteration, sum.Violations[2].Iteration})
	require.ErrorIs(t, sum.Violations[0], errA)
	assert.NotErrorIs(t, sum.Violations[0], errB)
	require.ErrorIs(t, sum.Violations[1], errB)
	require.ErrorIs(t, sum.Violations[2], errA)
	require.ErrorIs(t, sum.Violations[2], errB)
}

func TestRunSameSeedSameIterations(t *testing.T) {
	record := func(seed int64) []string {
		var got []string
		dir := t.TempDir()
		plan := crashtest.Plan{
			Iterations: 8,
			Failpoints: []string{"atomicfile.before-write"},
			Seed:       seed,
			MaxDelay:   time.Second,
			Start: func(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
				got = append(got, fmt.Sprintf("%d %s %q %v %d", it.N, it.Failpoint, it.Failpoints, it.KillAfter, it.Schedule.Intn(1<<30)))
				return crashtest.Start(ctx, crashtest.Cmd{Path: testprog, Args: []string{"-file", filepath.Join(dir, "f")}, Stdin: strings.NewReader("")})
			},
		}
		sum, err := crashtest.Run(t.Context(), nil, plan)
		require.NoError(t, err)
		assert.Equal(t, seed, sum.Seed)
		assert.Equal(t, []string{"atomicfile.before-write"}, sum.Unfired)
		return got
	}
	a := record(99)
	require.Len(t, a, 8)
	assert.Equal(t, `0 atomicfile.before-write "atomicfile.before-write=kill" 0s`, a[0][:strings.LastIndexByte(a[0], ' ')])
	assert.Equal(t, a, record(99))
	assert.NotEqual(t, a, record(100))
}

func TestRunSeedFromEnv(t *testing.T) {
	t.Setenv(crashtest.SeedEnvVar, "31337")
	plan := crashtest.Plan{
		Iterations: 1,
		Start: func(ctx context.Context, _ *crashtest.Iteration) (*crashtest.Process, error) {
			return crashtest.Start(ctx, crashtest.Cmd{Path: testprog, Args: []string{"-fail"}})
		},
	}
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	assert.Equal(t, int64(31337), sum.Seed)
	require.Len(t, sum.Violations, 1, "a process that fails on its own is a violation")
	var ee *crashtest.ExitError
	require.ErrorAs(t, sum.Violations[0], &ee)
	assert.Equal(t, 3, ee.Code)
	assert.Contains(t, sum.Violations[0].Error(), "seed 31337")

	t.Setenv(crashtest.SeedEnvVar, "x")
	_, err = crashtest.Run(t.Context(), t, plan)
	assert.Error(t, err)
}

// TestRunUnfiredFailpoint: a drive that never reaches the armed point ends
// with the process still running; Run kills it, counts a crash, and reports
// the point as never fired.
func TestRunUnfiredFailpoint(t *testing.T) {
	s := newAppendSuite(t)
	plan := s.plan()
	plan.Failpoints = []string{"atomicfile.before-write"}
	plan.Drive = func(context.Context, *crashtest.Iteration, *crashtest.Process) error { return nil }
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Crashes)
	assert.Zero(t, sum.Failpoints)
	assert.Equal(t, []string{"atomicfile.before-write"}, sum.Unfired)
	assert.Empty(t, sum.Violations)
}

func TestRunTimeout(t *testing.T) {
	s := newAppendSuite(t)
	plan := s.plan()
	plan.Failpoints = []string{"atomicfile.before-write"}
	plan.Drive = nil // waits for a death that never comes: nothing is written
	plan.Timeout = 100 * time.Millisecond
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	require.Len(t, sum.Violations, 1)
	assert.ErrorContains(t, sum.Violations[0], "Plan.Timeout")
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := newAppendSuite(t)
	plan := s.plan()
	plan.Iterations = 1000
	plan.Check = func(context.Context, *crashtest.Iteration) error {
		cancel()
		return nil
	}
	sum, err := crashtest.Run(ctx, t, plan)
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, sum.Iterations, 2)
}

func TestRunRejectsPlan(t *testing.T) {
	start := func(context.Context, *crashtest.Iteration) (*crashtest.Process, error) { return nil, nil }
	tests := []struct {
		name string
		plan crashtest.Plan
	}{
		{"no start", crashtest.Plan{Iterations: 1}},
		{"nothing to crash", crashtest.Plan{Start: start}},
		{"unknown failpoint", crashtest.Plan{Start: start, Failpoints: []string{"nosuch.point"}}},
		{"delays reversed", crashtest.Plan{Start: start, Iterations: 1, MinDelay: time.Second, MaxDelay: time.Millisecond}},
		{"negative delay", crashtest.Plan{Start: start, Iterations: 1, MinDelay: -time.Second}},
		{"negative timeout", crashtest.Plan{Start: start, Iterations: 1, Timeout: -time.Second}},
		{"recovery without Drive", crashtest.Plan{Start: start, Phases: []crashtest.Phase{crashtest.PhaseRecovery},
			Failpoints: crashtest.FailpointsIn(crashtest.PhaseRecovery)[:3]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := crashtest.Run(t.Context(), nil, tt.plan)
			assert.Error(t, err)
		})
	}
}

// TestRunCountsProcessesDriveStarts: a failpoint that kills a process
// Drive started with its ctx (PhaseAttach's second process) fired, as one
// that kills Start's does; one armed with another point, or started with
// another context, does not count; and Run kills what Drive left running
// when the iteration ends.
func TestRunCountsProcessesDriveStarts(t *testing.T) {
	dir := t.TempDir()
	var left []*crashtest.Process
	start := func(ctx context.Context, file, failpoints string) (*crashtest.Process, error) {
		return crashtest.Start(ctx, crashtest.Cmd{Path: testprog, Args: []string{"-file", filepath.Join(dir, file)}, Failpoints: failpoints})
	}
	// crash starts a second process armed with failpoints and feeds it
	// a line, which its failpoint kills it before writing.
	crash := func(ctx context.Context, it *crashtest.Iteration, failpoints string) error {
		p2, err := start(ctx, fmt.Sprintf("second-%d", it.N), failpoints)
		if err != nil {
			return err
		}
		fmt.Fprintln(p2.Stdin(), "line")
		if err := p2.Wait(); !errors.Is(err, crashtest.ErrKilled) {
			return fmt.Errorf("the second process was not killed: %v", err)
		}
		return nil
	}
	plan := crashtest.Plan{
		Failpoints: []string{"atomicfile.before-write", "atomicfile.before-rename", "atomicfile.before-fsync"},
		Seed:       1,
		Start: func(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
			return start(ctx, "first", it.Failpoints) // given nothing to write: never reaches its point
		},
		Drive: func(ctx context.Context, it *crashtest.Iteration, p *crashtest.Process) error {
			switch it.N {
			case 0:
				p3, err := start(ctx, "third", "") // left running
				if err != nil {
					return err
				}
				left = append(left, p3)
				return crash(ctx, it, it.Failpoints)
			case 1:
				return crash(ctx, it, "atomicfile.before-write=kill") // not the iteration's point
			default:
				return crash(context.WithoutCancel(t.Context()), it, it.Failpoints) // not the iteration's context
			}
		},
	}
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	require.NoError(t, sum.Err())
	assert.Equal(t, 1, sum.Failpoints)
	assert.Equal(t, []string{"atomicfile.before-rename", "atomicfile.before-fsync"}, sum.Unfired)
	assert.Equal(t, 3, sum.Crashes)
	require.Len(t, left, 1)
	assert.True(t, left[0].Exited(), "what Drive left running ends with the iteration")
	assert.True(t, left[0].Killed())
}

// TestRunTimeoutInPrepare: a preparing run that never crashes in a change
// runs out of Plan.Timeout there, and the violation says so, rather than
// blaming the Start that comes after it.
func TestRunTimeoutInPrepare(t *testing.T) {
	s := newAppendSuite(t)
	plan := s.plan()
	plan.Phases = []crashtest.Phase{crashtest.PhaseRecovery}
	plan.Failpoints = []string{"atomicfile.before-write"}
	plan.Timeout = 100 * time.Millisecond
	started := 0
	start := plan.Start
	plan.Start = func(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
		started++
		return start(ctx, it)
	}
	plan.Drive = func(ctx context.Context, _ *crashtest.Iteration, p *crashtest.Process) error {
		select { // makes no change: testprog waits for its input
		case <-p.Done():
		case <-ctx.Done():
		}
		return nil
	}
	sum, err := crashtest.Run(t.Context(), t, plan)
	require.NoError(t, err)
	require.Len(t, sum.Violations, 1)
	assert.ErrorContains(t, sum.Violations[0], "ran out of Plan.Timeout (100ms) in the run preparing it (Iteration.Prepare)")
	assert.NotContains(t, sum.Violations[0].Error(), "start:")
	assert.Equal(t, 1, started, "the iteration's own start does not follow")
	assert.Equal(t, []string{"atomicfile.before-write"}, sum.Unfired)
}
