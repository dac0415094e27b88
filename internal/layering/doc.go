// Package layering holds no code: its tests keep the package dependencies of
// DESIGN.md, where an import may only point down the package table, and
// its rule that the module fails to build on Windows with a clear message.
package layering
