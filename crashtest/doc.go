// Package crashtest crash-tests a program the way an OOM killer, a closed
// terminal or an impatient MCP client would: it builds the binary, starts it
// with failpoints armed (MCPKEEP_FAILPOINTS), drives it, SIGKILLs it at a
// named failpoint or after a random delay, restarts it and runs the caller's
// invariant checks, over and over.
//
// Build compiles a main package; Start runs it and returns a Process whose
// Kill, Wait, Killed and Stderr tell a kill from a clean exit from a failure.
// Cmd.Failpoints arms failpoints, separated by ";", each with an action:
// kill, error (an injected I/O error) or sleep(D), on every hit or the
// Nth (kill@N).
// Run is the loop for a suite: it crashes each failpoint of a Plan in turn,
// then at random, collects every Violation rather than stopping at the
// first, and returns a Summary whose String is the one line
//
//	crash suite: N crashes, K failpoints, V violations, seed S
//
// Failpoints lists the toolkit's failpoints, each with the phases of a
// server's life that reach it (a fresh install, a restart, a change, a
// shutdown, the recovery after a crash mid-change, an upgrade, packing,
// attaching, a writer elected among hosts, a home replicated through a
// git remote); FailpointsIn gives a Plan every name its phases reach. A
// Plan says which phases its functions can set up (Plan.Phases), Run tells
// them which one each iteration needs (Iteration.Phase: a new home for a
// fresh install, say), makes the crash a recovery iteration starts from,
// and, for a failpoint that never fired, logs what the phase needed.
//
// Every random choice comes from a Schedule built from one seed, printed in
// each violation and in the summary; setting MCPKEEP_CRASH_SEED to it
// (SeedFromEnv) replays the run's choices.
//
// What it does not do: a SIGKILL leaves the kernel's page cache intact, so
// these crashes cannot find a missing fsync; that takes a power-cut test (a
// file system shut down under the program). A seed replays which points are
// armed, the kill delays and the workload a Drive draws from the Iteration's
// Schedule, not the exact instruction a timed kill lands on. The invariants
// are the caller's: crashtest only runs them. The package writes nothing to
// stdout; it logs through a Logger such as *testing.T. Linux and macOS only;
// on Linux it reads /proc to tell a failpoint's own kill from one it sent.
package crashtest
