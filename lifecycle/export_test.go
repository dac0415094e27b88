package lifecycle

// Exposed is exposed for TestExposed: the tests bind loopback only.
var Exposed = exposed

// Pollable is pollable, for tests.
var Pollable = pollable
