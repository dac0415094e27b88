// Package doccheck holds no code: its test keeps the documentation rules of
// STYLE.md for every library package of the module (binaries are exempt):
// a package doc comment, a doc comment on every exported name, at least one
// runnable Example in each public package, and, in the packages listed in
// the test, a comment on every exported struct field. It also keeps README's
// harness snippet the code of lifecycle's ExampleHarness, which compiles.
package doccheck
