package lifecycle

// Exposed is exposed for TestExposed: the tests bind loopback only.
var Exposed = exposed
