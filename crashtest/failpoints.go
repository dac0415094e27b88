package crashtest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
)

// Phase is a part of a server's life, on lifecycle's harness, that
// reaches some of the toolkit's failpoints. A Plan lists the phases its
// functions know how to set up (Plan.Phases), and Run tells them which one
// an iteration needs (Iteration.Phase). The phases are the Phase*
// constants (PhaseInstall, PhaseRestart, PhaseChange, ...); `go doc
// crashtest.PhaseInstall` lists them all with what each needs of a Plan.
type Phase string

// The phases, in the order of a server's life. Each says what the Plan's
// functions must do in an iteration of that phase; its value is the name
// Run's log lines and Failpoint.Phases print.
const (
	// PhaseInstall: the first start on a new home (bootstrap's layout,
	// default files and first commit). Start must start the server on a
	// home that does not exist yet, a new one for each such iteration.
	PhaseInstall Phase = "install"
	// PhaseRestart: a start on an installed home (the lock, the boot
	// record, the state file, the registry). Any Start reaches it.
	PhaseRestart Phase = "restart"
	// PhaseChange: a tool's change through lifecycle.Env.Update. Drive
	// must call a tool that changes the home and wait for its answer.
	PhaseChange Phase = "change"
	// PhaseShutdown: a clean stop (the shutdown commit, the state file and
	// the registry entry removed). Drive must stop the server cleanly
	// after its changes, by closing its stdin, and wait for it to exit.
	PhaseShutdown Phase = "shutdown"
	// PhaseRecovery: the start after a crash in the middle of a change.
	// Run makes that crash first: it starts the server with
	// Iteration.Prepare set and a failpoint that interrupts the first
	// change, and drives it, so Drive must make a change; then it starts
	// the server again with the iteration's failpoint armed.
	PhaseRecovery Phase = "recovery"
	// PhaseUpgrade: a start with a higher Spec.Schema on an older home
	// (the migrations). Start must start a build of the newer schema on a
	// home the older one installed.
	PhaseUpgrade Phase = "upgrade"
	// PhasePack: the config repository packing its objects, which the
	// harness does beside the changes, not on their path: beside the first
	// change after a start, and about a second after the last change,
	// while the server runs (a clean stop does not pack), once more than
	// Spec.Git.PackThreshold (T) objects are loose or in packs of fewer
	// than 4×T objects. The journal writes each burst of changes as one
	// pack, so a quick burst of many changes makes a pack that no longer
	// counts. Set T low in the server under test (8, say). Start must start
	// the server on a new home when Iteration.Phase is PhasePack (its
	// install leaves the loose objects gitstore.after-pack needs a pack to
	// write), and Drive must make changes that write more than T objects
	// and fewer than 4×T (a change writes a blob for each file it writes,
	// a tree for each directory on their paths and a commit: 4 for one
	// file in a directory), then wait for the process to die rather than
	// stop it.
	PhasePack Phase = "pack"
	// PhaseAttach: a second process on a home in use attaching to its
	// writer, and the handover when the writer goes. Once the first
	// process serves (it has answered its client's initialize), Drive must
	// start a second one on the same home with crashtest.Start, Drive's ctx
	// and Iteration.Failpoints: Run counts a failpoint that kills either
	// process. Start arms the first one too, which is the writer and
	// reaches attach.writer-after-hello, attach.writer-before-goodbye and
	// lifecycle.handover-before-drain; the second reaches the others. Then
	// Drive must have the second one's client initialize and wait for the
	// answer, stop the first (close its stdin) so that the second takes
	// over, and make a change through the second. attach.before-replay
	// needs a client that sends initialize: one of a protocol before
	// 2026-07-28 (the go-sdk client's ClientSessionOptions.ProtocolVersion
	// "2025-11-25", say).
	PhaseAttach Phase = "attach"
	// PhaseElect: a writer elected among hosts (lifecycle.Options.Elector,
	// such as package lifecycle/etcdlock's) taking office, acknowledging a
	// change and resigning. Start must start a server with an Elector
	// (on an etcd the test runs) when Iteration.Phase is PhaseElect, and
	// Drive must make a change and stop it cleanly.
	PhaseElect Phase = "elect"
	// PhaseRemote: a home replicated through a git remote
	// (lifecycle.Options.Remote): the fetch at the start, a merge of the
	// remote's changes, a push in sync mode. Start must start a server
	// with Options.Remote on a remote the test makes when Iteration.Phase
	// is PhaseRemote, and Drive must make changes there and on the remote.
	PhaseRemote Phase = "remote"
)

// Phases returns every phase, in the order of a server's life.
func Phases() []Phase {
	out := make([]Phase, len(failpoint.Phases))
	for i, p := range failpoint.Phases {
		out[i] = Phase(p)
	}
	return out
}

// Failpoint is one of the toolkit's failpoints, as Plan.Failpoints and
// Cmd.Failpoints name it.
type Failpoint struct {
	Name    string  // "gitstore.before-ref": what Plan.Failpoints takes
	Package string  // the package that defines it: "gitstore"
	Phases  []Phase // the phases that reach it; Run uses the first the Plan lists
	Note    string  // what else reaching it needs, if anything
}

// Failpoints returns every failpoint of the toolkit, in package order,
// with the phases of a server's life that reach it.
func Failpoints() []Failpoint {
	out := make([]Failpoint, 0, len(failpoint.Names))
	for _, name := range failpoint.Names {
		r := failpoint.Reach[name]
		pkg, _, _ := strings.Cut(name, ".")
		f := Failpoint{Name: name, Package: pkg, Note: r.Note}
		for _, p := range r.Phases {
			f.Phases = append(f.Phases, Phase(p))
		}
		out = append(out, f)
	}
	return out
}

// FailpointsIn returns the names of the failpoints that one of phases
// reaches, in package order: the Plan.Failpoints of a Plan whose Phases
// are phases.
func FailpointsIn(phases ...Phase) []string {
	var names []string
	for _, f := range Failpoints() {
		if slices.ContainsFunc(f.Phases, func(p Phase) bool { return slices.Contains(phases, p) }) {
			names = append(names, f.Name)
		}
	}
	return names
}

// UnreachableError is Run's error for a Plan whose Failpoints name one
// that none of Plan.Phases reaches: the plan lacks the phases it needs.
type UnreachableError struct {
	Failpoint string  // the failpoint
	Needs     []Phase // the phases that reach it, none of them in Plan.Phases; none when no phase does
}

// Error names the failpoint and the phases the plan lacks, or says that
// no phase reaches it.
func (e *UnreachableError) Error() string {
	if len(e.Needs) == 0 {
		how := ""
		if note := failpoint.Reach[e.Failpoint].Note; note != "" {
			how = " (it is reached " + note + ")"
		}
		return fmt.Sprintf("crashtest: Plan.Failpoints: %s is reached by no server on lifecycle's harness%s: "+
			"take it out of Plan.Failpoints, or take Plan.Failpoints from FailpointsIn(Plan.Phases...)", e.Failpoint, how)
	}
	needs := make([]string, len(e.Needs))
	for i, p := range e.Needs {
		needs[i] = string(p)
	}
	return fmt.Sprintf("crashtest: Plan.Failpoints: %s is reached only in phase %s, which Plan.Phases lacks: "+
		"add the phase (and set it up when Iteration.Phase says so), or take Plan.Failpoints from FailpointsIn(Plan.Phases...)",
		e.Failpoint, strings.Join(needs, " or "))
}

// phaseFor returns the phase an iteration crashing name runs in: the
// first phase that reaches it and that the plan lists (any, when it lists
// none).
func phaseFor(name string, planned []Phase) (Phase, error) {
	r := failpoint.Reach[name]
	for _, p := range r.Phases {
		if len(planned) == 0 || slices.Contains(planned, Phase(p)) {
			return Phase(p), nil
		}
	}
	e := &UnreachableError{Failpoint: name}
	for _, p := range r.Phases {
		e.Needs = append(e.Needs, Phase(p))
	}
	return "", e
}

// hint says what the Plan's functions must do for a failpoint of phase p
// to be reached: the line Run logs for a failpoint that never fired.
// listed says whether Plan.Phases lists p, prepared whether the run
// preparing a PhaseRecovery iteration crashed in a change.
func hint(name string, p Phase, listed, prepared bool) string {
	var h string
	switch p {
	case PhaseInstall:
		h = "Start must start the server on a home that does not exist yet when Iteration.Phase is PhaseInstall"
	case PhaseRestart:
		h = "Start must start the server and Drive must let it get ready (a first answer) before it returns"
	case PhaseChange:
		h = "Drive must call a tool that changes the home (lifecycle.Env.Update) and wait for its answer"
	case PhaseShutdown:
		h = "Drive must stop the server cleanly after its changes (close its stdin) and wait for it to exit"
	case PhaseRecovery:
		h = "Drive must make a change in the run with Iteration.Prepare set, for the next start to recover it"
		if !prepared {
			h += " (the preparing run did not crash in a change)"
		}
	case PhaseUpgrade:
		h = "when Iteration.Phase is PhaseUpgrade, Start must start a build of a higher Spec.Schema, with its migration, on a home of the older one"
	case PhasePack:
		h = "when Iteration.Phase is PhasePack, Start must start the server on a new home, and Drive must make changes that write more than Spec.Git.PackThreshold objects " +
			"and fewer than 4 times as many, then wait for the process to die rather than stop it (see PhasePack)"
	case PhaseAttach:
		h = "when Iteration.Phase is PhaseAttach, Drive must start a second process on the home, with crashtest.Start, Drive's ctx and Iteration.Failpoints, once the first serves, " +
			"then stop the first so that the second takes over (see PhaseAttach)"
	case PhaseElect:
		h = "when Iteration.Phase is PhaseElect, Start must start a server with lifecycle.Options.Elector, and Drive must make a change and stop it cleanly"
	case PhaseRemote:
		h = "when Iteration.Phase is PhaseRemote, Start must start a server with lifecycle.Options.Remote, and Drive must make changes on it and, conflicting, on the remote"
	default:
		h = "no phase of a server on the harness reaches it"
	}
	if note := failpoint.Reach[name].Note; note != "" {
		h += "; it is reached " + note
	}
	if !listed && p != "" {
		h = fmt.Sprintf("Plan.Phases does not list phase %s, so Run set nothing up for it and did not ask the plan's functions to (Iteration.Phase): list it in Plan.Phases; then %s", p, h)
	}
	return h
}
