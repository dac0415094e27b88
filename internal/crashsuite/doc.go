// Package crashsuite proves, on the real binaries, the promise the toolkit
// makes: a crash at any moment loses nothing a server acknowledged, and
// leaves a home the next start repairs without a human. It holds only tests.
//
// TestCrashSuite builds cmd/helios and cmd/mcpkeep and, through crashtest,
// crashes helios while a client streams update_preference calls and
// records which were acknowledged: first at every name in failpoint.Names
// but failpoint.Unreached (each armed to kill, on the workload that reaches
// it: a fresh home for the install points, a home past the pack threshold
// for gitstore's pack points, a home with an update interrupted between its
// barriers for the start that rolls it forward, an upgrade for the
// migration points, a writer with a second helios attached to it for the
// points of attach and handover, a writer elected through a real etcd for
// the points of taking office, acknowledging and resigning), then by
// SIGKILL after a random delay during the stream, during start-up
// recovery, during the bootstrap of a fresh home, during packing, during
// an upgrade, during shutdown (stdin EOF with calls in flight, or
// SIGTERM), and of the writer or of the
// attached process while both their clients update. In the attach
// workload the process that is not crashed must keep answering its
// client (after a handover, as the new writer), an update whose outcome
// it reports unknown may or may not land, and once its client goes it
// must exit cleanly by itself. After each crash the next start must
// succeed, and then: every acknowledged value is in its file and in the
// commit the server named; every config file parses; git fsck --full
// --strict is clean; no temporary file, checkpoint or state file of a dead process
// survives the start (a temporary file the running server renames or
// removes within 30 s is its own live write's, such as its flush of the
// merge a start from a git remote made, not an orphan); no socket, state file or PID file survives the last
// clean stop; the registry holds no dead entry; and mcpkeep doctor
// --json reports a clean home. It fails if any failpoint never fired, so a
// new point cannot be added without being crashed. It logs one line:
//
//	crash suite: N crashes, K failpoints, 0 violations, seed S
//
// TestPowerCuts runs helios on a loop-mounted ext4 image and cuts the power
// (EXT4_IOC_SHUTDOWN without flushing the journal) during its start or a
// stream of acknowledged writes, then remounts, restarts and checks the
// same invariants: unlike a SIGKILL, a power cut loses whatever was not
// fsynced.
//
// TestFaults injects real kernel errors into a running helios (ENOSPC from
// a full tmpfs, EROFS from a read-only bind mount, EACCES as an
// unprivileged user, EIO through the failpoint error action) and checks
// that the tool error names the file and the remedy, the old bytes stay,
// the server keeps serving, and what it acknowledged after the fault
// survives a restart.
//
// TestBadInput starts helios and mcpkeep on the corrupt, torn and foreign
// files of testdata/ (config YAML, state.json, .lock, .version, the
// registry, newer schemas) and checks the clear error or the repair, with
// every bad file quarantined byte for byte and no acknowledged value lost.
//
// Environment: MCPKEEP_CRASHES sets the number of crashes (default 100, 15
// with -short, never fewer than one per failpoint); MCPKEEP_POWER_CUTS the
// number of power cuts (default 20, 3 with -short); MCPKEEP_CRASH_SEED
// replays a run's schedule from the seed it printed. The fault and
// power-cut tests need root on Linux, and the power cuts loop devices and
// mkfs.ext4; they skip with the reason elsewhere.
//
// What it does not prove: that helios is correct where it does not go
// through the harness, or that a disk which lies about flushing its cache
// keeps data: the power cuts stop ext4, not the device under it.
package crashsuite
