// Package layering holds no code: its test keeps the package dependencies of
// DESIGN.md, where an import may only point down the package table.
package layering
