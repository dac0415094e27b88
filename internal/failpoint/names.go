package failpoint

// Names lists every failpoint the toolkit defines, in package order. Tests
// iterate over it to crash each point in turn; a point that is hit but not
// listed here is reported by TestEveryHitIsListed. Each package owns its block.
var Names = []string{
	// atomicfile: one durable replace.
	"atomicfile.before-write",
	"atomicfile.before-fsync",
	"atomicfile.before-rename",
	"atomicfile.before-dir-fsync",

	// statefile: the registry's locked read-modify-write.
	"statefile.registry-locked",

	// gitstore: one commit, in order, then housekeeping. A commit writes
	// its objects in one atomicfile.WriteFiles, then the ref, the stamp and
	// the index in another: atomicfile's points, before-rename@N among
	// them, reach every state in between.
	"gitstore.before-objects",
	"gitstore.before-ref",
	"gitstore.before-pack",
	"gitstore.after-pack", // the new pack is durable; what it replaces is not yet deleted

	// bootstrap: install, upgrade, stamp.
	"bootstrap.after-dirs",
	"bootstrap.after-defaults",
	"bootstrap.after-git-init",
	"bootstrap.after-initial-commit",
	"bootstrap.before-migration",
	"bootstrap.after-migration",
	"bootstrap.before-stamp",

	// recovery: checkpoints of multi-file updates.
	"recovery.begin-after-preimage",
	"recovery.before-done",
	"recovery.during-rollback",

	// lifecycle: the home lock, then the harness's start-up and shutdown.
	"lifecycle.lock-after-flock",
	"lifecycle.after-state-write",
	"lifecycle.before-shutdown-commit",
}
