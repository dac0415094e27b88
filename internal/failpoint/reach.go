package failpoint

// The parts of a server's life (on lifecycle's harness) that reach
// failpoints, as crashtest exports them.
const (
	Install  = "install"  // the first start on a new home: bootstrap's layout, default files and first commit
	Restart  = "restart"  // a start on an installed home: the lock, the boot record, the state file, the registry
	Change   = "change"   // a tool's change through lifecycle.Env.Update, and its commit
	Shutdown = "shutdown" // a clean stop: the shutdown commit, the state file and the registry entry removed
	Recovery = "recovery" // the start after a crash in the middle of a change: recovery puts the home right
	Upgrade  = "upgrade"  // a start of a higher Spec.Schema on an older home: the migrations
	Pack     = "pack"     // the config repository packing its loose objects
	Attach   = "attach"   // a second process attaching to the writer, and the handover when the writer goes
	Elect    = "elect"    // a writer elected among hosts (Options.Elector): taking office, acknowledging a change, resigning
	Remote   = "remote"   // a home replicated through a git remote (Options.Remote): fetch, merge, push
)

// Phases lists every phase, in the order of a server's life.
var Phases = []string{Install, Restart, Change, Shutdown, Recovery, Upgrade, Pack, Attach, Elect, Remote}

// Reached is how a server reaches a failpoint.
type Reached struct {
	Phases []string // the phases that hit it, the one a crash test should use first
	Note   string   // what else reaching it needs, if anything
}

// InterruptChange is the failpoint that interrupts a change in the
// middle: its journal record is durable, its files are not in place and
// its commit is not in the repository, so the next start has a change to
// finish.
const InterruptChange = "gitstore.after-intent"

// Reach says, for every name in Names, how a server on the harness
// reaches it. TestReachCoversNames keeps the two in step.
var Reach = map[string]Reached{
	"atomicfile.before-write":     {Phases: []string{Restart, Install, Change, Shutdown, Recovery, Upgrade}},
	"atomicfile.before-fsync":     {Phases: []string{Restart, Install, Change, Shutdown, Recovery, Upgrade}},
	"atomicfile.before-rename":    {Phases: []string{Restart, Install, Change, Shutdown, Recovery, Upgrade}},
	"atomicfile.before-dir-fsync": {Phases: []string{Restart, Install, Change, Shutdown, Recovery, Upgrade}},

	"statefile.registry-locked": {Phases: []string{Restart, Install, Shutdown},
		Note: "only with the discovery registry on: give the server a registry file of the test's (MCPKEEP_REGISTRY)"},

	// Commit: the install's commit, and the commit of files changed by
	// hand (at every stop, which commits nothing when nothing changed).
	"gitstore.before-objects": {Phases: []string{Shutdown, Install}},
	"gitstore.before-ref": {Phases: []string{Install},
		Note: "by the install's commit, and by the commit of files changed by hand at a stop or the start after one"},
	// Apply: a change through lifecycle.Env.Update.
	"gitstore.before-intent":    {Phases: []string{Change}},
	"gitstore.after-intent":     {Phases: []string{Change}},
	"gitstore.before-barrier-2": {Phases: []string{Change}},
	// The flush of changes into the repository: after a pause in the
	// changes, at a stop, and at the start after a crash left changes in
	// the journal.
	"gitstore.flush-after-pack": {Phases: []string{Recovery, Shutdown, Change}},
	"gitstore.flush-after-ref":  {Phases: []string{Recovery, Shutdown, Change}},
	// A home replicated through a git remote (Options.Remote): none without one.
	"gitstore.fetch-after-pack":  {Phases: []string{Remote}, Note: "only by a server with Options.Remote, fetching at its start"},
	"gitstore.merge-after-tag":   {Phases: []string{Remote}, Note: "only by a server with Options.Remote, merging a remote change that conflicts with one of its own"},
	"gitstore.push-after-remote": {Phases: []string{Remote}, Note: "only by a server with Options.Remote in sync mode, making a change"},
	"gitstore.before-pack": {Phases: []string{Pack},
		Note: "by the harness's housekeeping beside the first change after a start or a second after the last, once more than Spec.Git.PackThreshold objects " +
			"are loose or in packs of fewer than 4 times as many (or by a commit of files changed by hand, once more are loose): set it low in the server under test"},
	"gitstore.after-pack": {Phases: []string{Pack},
		Note: "as gitstore.before-pack, when the pack has loose objects to write (a new home's, from its install) or packs to merge"},

	"bootstrap.after-dirs":           {Phases: []string{Install}},
	"bootstrap.after-defaults":       {Phases: []string{Install}},
	"bootstrap.after-git-init":       {Phases: []string{Install}},
	"bootstrap.after-initial-commit": {Phases: []string{Install}},
	"bootstrap.before-migration":     {Phases: []string{Upgrade}},
	"bootstrap.after-migration":      {Phases: []string{Upgrade}},
	"bootstrap.before-stamp":         {Phases: []string{Restart, Install, Upgrade}},

	// recovery's checkpoints (Unreached): no server on the harness.
	"recovery.begin-after-preimage": {Note: "only by a program that changes files under recovery.Begin's checkpoints itself; lifecycle.Env.Update does not"},
	"recovery.before-done":          {Note: "only by a program that changes files under recovery.Begin's checkpoints itself; lifecycle.Env.Update does not"},
	"recovery.during-rollback":      {Note: "only by a program that changes files under recovery.Begin's checkpoints itself; lifecycle.Env.Update does not"},

	"attach.before-hello":       {Phases: []string{Attach}},
	"attach.writer-after-hello": {Phases: []string{Attach}},
	"attach.before-replay": {Phases: []string{Attach},
		Note: "only with a client that sent initialize (a protocol before 2026-07-28), by the process it reaches the writer through, once that process has taken over or attached to another writer"},
	"attach.writer-before-goodbye": {Phases: []string{Attach}},

	"lifecycle.lock-after-flock":       {Phases: []string{Restart, Install}},
	"lifecycle.after-state-write":      {Phases: []string{Restart, Install}},
	"lifecycle.takeover-after-lock":    {Phases: []string{Attach}},
	"lifecycle.handover-before-drain":  {Phases: []string{Attach}},
	"lifecycle.before-shutdown-commit": {Phases: []string{Shutdown}},

	// An elected writer's (Options.Elector): none without one.
	"lifecycle.elected-before-catch-up": {Phases: []string{Elect}, Note: "only by a server with Options.Elector, when it is elected"},
	"lifecycle.before-ack":              {Phases: []string{Elect}, Note: "only by a server with Options.Elector, acknowledging a change"},
	"lifecycle.before-resign":           {Phases: []string{Elect}, Note: "only by a server with Options.Elector, at a clean stop"},
}
