package lifecycle

// Exposed is exposed for TestExposed: the tests bind loopback only.
var Exposed = exposed

// Pollable is pollable, for tests.
var Pollable = pollable

// SetBeforeWait makes fn run each time Update is about to wait for its
// staged commit, and returns a function that undoes it.
func SetBeforeWait(fn func()) (restore func()) {
	old := beforeWait
	beforeWait = fn
	return func() { beforeWait = old }
}

// RunMain is Main without the exit, for the table of newcomers' mistakes.
var RunMain = runMain

// EnvsUsed is how many Envs the process has used (envs), for the test of
// ErrNested with one.
func EnvsUsed() int64 { return envs.Load() }
