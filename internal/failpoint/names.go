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
}
