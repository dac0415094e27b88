package gitstore

// SetMaxPacks sets how many packs Commit lets accumulate before it repacks
// everything, and returns a function that restores it.
func SetMaxPacks(n int) (restore func()) {
	old := maxPacks
	maxPacks = n
	return func() { maxPacks = old }
}
