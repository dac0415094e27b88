package lifecycle

// Exposed is exposed for TestExposed: the tests bind loopback only.
var Exposed = exposed

// Pollable is pollable, for tests.
var Pollable = pollable

// SetBeforeApply makes fn run each time a caller of Update is about to
// apply the waiting commits, and returns a function that undoes it.
func SetBeforeApply(fn func()) (restore func()) {
	old := beforeApply
	beforeApply = fn
	return func() { beforeApply = old }
}

// Waiting returns how many transactions of e are staged and unanswered.
func Waiting(e *Env) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.waiting)
}
