package crashtest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// TestFailpoints: the public list is the toolkit's own, in its order,
// each with its package and the known phases that reach it.
func TestFailpoints(t *testing.T) {
	all := crashtest.Failpoints()
	require.Len(t, all, len(failpoint.Names))
	for i, f := range all {
		assert.Equal(t, failpoint.Names[i], f.Name)
		assert.True(t, strings.HasPrefix(f.Name, f.Package+"."), f.Name)
		for _, p := range f.Phases {
			assert.Contains(t, crashtest.Phases(), p, f.Name)
		}
	}
	install := crashtest.FailpointsIn(crashtest.PhaseInstall)
	assert.Contains(t, install, "bootstrap.after-dirs")
	assert.Contains(t, install, "lifecycle.lock-after-flock", "every start takes the lock")
	assert.NotContains(t, install, "attach.before-hello")
	assert.NotContains(t, crashtest.FailpointsIn(crashtest.PhaseRestart, crashtest.PhaseChange), "bootstrap.after-dirs",
		"a fresh install alone reaches it")
	assert.Empty(t, crashtest.FailpointsIn())
	every := crashtest.FailpointsIn(crashtest.Phases()...)
	for _, f := range all {
		if len(f.Phases) > 0 {
			assert.Contains(t, every, f.Name)
		}
	}
}

// TestRunRefusesUnreachable: a Plan whose Phases reach none of the phases
// of one of its Failpoints is refused with an *UnreachableError naming the
// failpoint and the phases it lacks, before anything is started.
func TestRunRefusesUnreachable(t *testing.T) {
	started := false
	plan := crashtest.Plan{
		Phases:     []crashtest.Phase{crashtest.PhaseRestart, crashtest.PhaseChange},
		Failpoints: []string{"gitstore.before-intent", "bootstrap.after-dirs"},
		Start: func(context.Context, *crashtest.Iteration) (*crashtest.Process, error) {
			started = true
			return nil, nil
		},
	}
	_, err := crashtest.Run(t.Context(), nil, plan)
	var ue *crashtest.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "bootstrap.after-dirs", ue.Failpoint)
	assert.Equal(t, []crashtest.Phase{crashtest.PhaseInstall}, ue.Needs)
	assert.False(t, started)

	// A failpoint no phase reaches: only a program of its own hits it.
	plan.Failpoints = []string{"recovery.during-rollback"}
	_, err = crashtest.Run(t.Context(), nil, plan)
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "recovery.during-rollback", ue.Failpoint)
	assert.Empty(t, ue.Needs)
	assert.ErrorContains(t, err, "reached by no server on lifecycle's harness")
	assert.False(t, started)

	plan.Phases = append(plan.Phases, "boot")
	_, err = crashtest.Run(t.Context(), nil, plan)
	assert.ErrorContains(t, err, `unknown phase "boot"`)
}

// TestRunPhases: each failpoint iteration runs in the first of its phases
// the plan lists; random kills take the plan's phases in turn; a
// PhaseRecovery iteration is preceded by a run, with Prepare set, armed
// to interrupt a change, when the plan lists PhaseRecovery.
func TestRunPhases(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	file := filepath.Join(t.TempDir(), "f")
	plan := crashtest.Plan{
		Iterations: 7,
		Phases:     []crashtest.Phase{crashtest.PhaseChange, crashtest.PhaseInstall, crashtest.PhaseRecovery},
		Failpoints: []string{"gitstore.before-intent", "atomicfile.before-write", "bootstrap.after-dirs", "gitstore.flush-after-ref"},
		Seed:       1,
		Start: func(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
			mu.Lock()
			got = append(got, fmt.Sprintf("%d %s %q %v", it.N, it.Phase, it.Failpoints, it.Prepare))
			mu.Unlock()
			return crashtest.Start(ctx, crashtest.Cmd{Path: testprog, Args: []string{"-file", file}, Failpoints: it.Failpoints})
		},
		Drive: func(context.Context, *crashtest.Iteration, *crashtest.Process) error { return nil },
	}
	var log lines
	sum, err := crashtest.Run(t.Context(), &log, plan)
	require.NoError(t, err)
	assert.Equal(t, []string{
		`0 change "gitstore.before-intent=kill" false`,
		`1 install "atomicfile.before-write=kill" false`, // its first phase, restart, is not the plan's
		`2 install "bootstrap.after-dirs=kill" false`,
		`3 recovery "gitstore.after-intent=kill" true`,
		`3 recovery "gitstore.flush-after-ref=kill" false`,
		`4 change "" false`,
		`5 install "" false`,
		`6 recovery "gitstore.after-intent=kill" true`,
		`6 recovery "" false`,
	}, got)
	assert.Equal(t, []string{"gitstore.before-intent", "atomicfile.before-write", "bootstrap.after-dirs", "gitstore.flush-after-ref"}, sum.Unfired,
		"testprog is given nothing to write, installs nothing, recovers nothing")

	// Each never-fired line says what the phase needs of the plan.
	assert.True(t, log.has("failpoint bootstrap.after-dirs never fired (iteration 2, phase install): "+
		"Start must start the server on a home that does not exist yet"), log.String())
	assert.True(t, log.has("failpoint gitstore.before-intent never fired (iteration 0, phase change): "+
		"Drive must call a tool that changes the home"), log.String())
	assert.True(t, log.has("failpoint gitstore.flush-after-ref never fired (iteration 3, phase recovery): "), log.String())
	assert.True(t, log.has("(the preparing run did not crash in a change)"), log.String())

	// A plan without Phases is asked for nothing: no preparing run, and
	// the never-fired line says which phase to list.
	got, log = nil, lines{}
	plan.Phases, plan.Iterations, plan.Failpoints = nil, 2, []string{"gitstore.flush-after-ref", "bootstrap.after-dirs"}
	sum, err = crashtest.Run(t.Context(), &log, plan)
	require.NoError(t, err)
	assert.Equal(t, []string{
		`0 recovery "gitstore.flush-after-ref=kill" false`,
		`1 install "bootstrap.after-dirs=kill" false`,
	}, got)
	assert.Equal(t, plan.Failpoints, sum.Unfired)
	assert.True(t, log.has("failpoint gitstore.flush-after-ref never fired (iteration 0, phase recovery): "+
		"Plan.Phases does not list phase recovery"), log.String())
}

// lines is a Logger that keeps what it is given.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, fmt.Sprintf(format, args...))
}

func (l *lines) has(part string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.all, func(s string) bool { return strings.Contains(s, part) })
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// TestRunPackHint: the never-fired line of a pack failpoint gives the
// recipe that packs: a new home, changes past the threshold but not a
// burst that makes a pack too large to count, and no clean stop.
func TestRunPackHint(t *testing.T) {
	plan := crashtest.Plan{
		Phases:     []crashtest.Phase{crashtest.PhasePack},
		Failpoints: []string{"gitstore.after-pack"},
		Start: func(ctx context.Context, it *crashtest.Iteration) (*crashtest.Process, error) {
			return crashtest.Start(ctx, crashtest.Cmd{Path: testprog, Args: []string{"-file", filepath.Join(t.TempDir(), "f")}, Failpoints: it.Failpoints})
		},
		Drive: func(context.Context, *crashtest.Iteration, *crashtest.Process) error { return nil },
	}
	var log lines
	sum, err := crashtest.Run(t.Context(), &log, plan)
	require.NoError(t, err)
	assert.Equal(t, plan.Failpoints, sum.Unfired)
	assert.True(t, log.has("failpoint gitstore.after-pack never fired (iteration 0, phase pack): "+
		"when Iteration.Phase is PhasePack, Start must start the server on a new home, and Drive must make changes that write more than Spec.Git.PackThreshold objects "+
		"and fewer than 4 times as many, then wait for the process to die rather than stop it"), log.String())
	assert.True(t, log.has("when the pack has loose objects to write"), log.String())
}

// TestFailpointSlips: a misspelt name gets one hint, with the name meant;
// failpoints separated by commas get the separator.
func TestFailpointSlips(t *testing.T) {
	start := func(context.Context, *crashtest.Iteration) (*crashtest.Process, error) { return nil, nil }
	_, err := crashtest.Run(t.Context(), nil, crashtest.Plan{Start: start, Failpoints: []string{"atomicfile.before-renam"}})
	assert.EqualError(t, err, `crashtest: Plan.Failpoints: unknown failpoint "atomicfile.before-renam": `+
		`did you mean atomicfile.before-rename? (crashtest.Failpoints lists them all)`)

	_, err = crashtest.Start(t.Context(), crashtest.Cmd{Path: testprog, Failpoints: "atomicfile.before-rename=kill,gitstore.before-ref=kill"})
	assert.EqualError(t, err, `crashtest: Cmd.Failpoints "atomicfile.before-rename=kill,gitstore.before-ref=kill": `+
		`atomicfile.before-rename: action "kill,gitstore.before-ref=kill" holds another failpoint: separate them with ";", not ","`)
}
