// Package crashtest crash-tests a program the way an OOM killer, a closed
// terminal or an impatient MCP client would: it builds the binary, starts it
// with failpoints armed (MCPKEEP_FAILPOINTS), drives it, SIGKILLs it at a
// named failpoint or after a random delay, restarts it and runs the caller's
// invariant checks.
//
// Build compiles a main package; Start runs it and returns a Process whose
// Kill, Wait, Killed and Stderr tell a kill from a clean exit from a failure.
//
// Every random choice comes from a Schedule built from one seed, printed in
// each failure; setting MCPKEEP_CRASH_SEED to it (SeedFromEnv) replays the
// run's choices.
//
// What it does not do: a SIGKILL leaves the kernel's page cache intact, so
// these crashes cannot find a missing fsync; that takes a power-cut test (a
// file system shut down under the program). A seed does not replay the exact
// instruction a timed kill lands on. The package writes nothing to stdout.
// Linux and macOS only; on Linux it reads /proc to tell a failpoint's own
// kill from one it sent.
package crashtest
