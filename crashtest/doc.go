// Package crashtest crash-tests a program the way an OOM killer, a closed
// terminal or an impatient MCP client would: it starts the binary with
// failpoints armed (MCPKEEP_FAILPOINTS), SIGKILLs it at a named failpoint or
// after a random delay, restarts it and runs the caller's invariant checks.
//
// Every random choice comes from a Schedule built from one seed, printed in
// each failure; setting MCPKEEP_CRASH_SEED to it (SeedFromEnv) replays the
// run's choices. A seed does not replay the exact instruction a timed kill
// lands on. Linux and macOS only.
package crashtest
