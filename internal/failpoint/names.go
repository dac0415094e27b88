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

	// gitstore: the change path (Apply), in order: the temporary files are
	// written, then the journal record; barrier 1; the renames (atomicfile's
	// before-rename@N between them); barrier 2. Then a flush: the pack, the
	// ref, the caches.
	"gitstore.before-intent",
	"gitstore.after-intent", // barrier 1 returned: the batch is durable, nothing is renamed
	"gitstore.before-barrier-2",
	"gitstore.flush-after-pack",
	"gitstore.flush-after-ref",

	// gitstore: a remote (issue 15). A fetch writes the remote's objects
	// as one durable pack, then the tracking ref; a merge with conflicts
	// writes its conflicts/<time> tag, then stages the merge commit, which
	// Apply makes durable; in sync mode a push reaches the remote before
	// the batch's first barrier here.
	"gitstore.fetch-after-pack",
	"gitstore.merge-after-tag",
	"gitstore.push-after-remote", // the remote has the batch; nothing of it is durable here

	// bootstrap: install, upgrade, stamp.
	"bootstrap.after-dirs",
	"bootstrap.after-defaults",
	"bootstrap.after-git-init",
	"bootstrap.after-initial-commit",
	"bootstrap.before-migration",
	"bootstrap.after-migration",
	"bootstrap.before-stamp",

	// recovery: checkpoints of multi-file updates (see Unreached).
	"recovery.begin-after-preimage",
	"recovery.before-done",
	"recovery.during-rollback",

	// attach: a process attaching to the home's writer, and the writer
	// handing its attached sessions over.
	"attach.before-hello",          // a forwarder that reached the socket
	"attach.writer-after-hello",    // the writer, before it serves the new session
	"attach.before-replay",         // a forwarder, before it sets its client's session up again
	"attach.writer-before-goodbye", // the writer handing over, before it tells a forwarder what it left unread

	// lifecycle: the home lock, then the harness's start-up, handover and
	// shutdown.
	"lifecycle.lock-after-flock",
	"lifecycle.after-state-write",
	"lifecycle.takeover-after-lock",   // an attached process that took the lock, before it starts as the writer
	"lifecycle.handover-before-drain", // the writer, socket closed, before it drains its attached sessions
	"lifecycle.before-shutdown-commit",

	// lifecycle, a home whose writer is elected among hosts
	// (Options.Elector): taking office, acknowledging a change, resigning.
	"lifecycle.elected-before-catch-up", // elected, before catching up and serving as the active writer
	"lifecycle.before-ack",              // a change durable, before its term is confirmed and it is acknowledged
	"lifecycle.before-resign",           // a clean stop, after the shutdown commit, before the lease is given up
}

// Unreached lists the points of Names that no binary of this module
// reaches: library code its servers no longer call (recovery's
// checkpoints, which lifecycle.Env.Update replaced with gitstore's
// journal, are for programs that change files without git). Their
// packages' own kill tests crash them; the crash suite, which crashes the
// binaries, leaves them out.
var Unreached = []string{
	"recovery.begin-after-preimage",
	"recovery.before-done",
	"recovery.during-rollback",
}
