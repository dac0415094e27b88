package gitstore

import "time"

// SetPackLimits sets the progression packs are kept in (see packFactor,
// frozenPacks and maxMerge) and returns a function that restores it.
func SetPackLimits(factor, frozen, merge int) (restore func()) {
	old := [3]int{packFactor, frozenPacks, maxMerge}
	packFactor, frozenPacks, maxMerge = factor, frozen, merge
	return func() { packFactor, frozenPacks, maxMerge = old[0], old[1], old[2] }
}

// ForceMerge makes every packing merge the smallest packs, up to the
// maxMerge bound, and returns a function that restores the policy.
func ForceMerge() (restore func()) {
	forceMerge = true
	return func() { forceMerge = false }
}

// SafePath is safePath, for its table test.
var SafePath = safePath

// SetPackIdle sets how long Maintain waits without a change before it
// packs, and returns a function that restores it.
func SetPackIdle(d time.Duration) (restore func()) {
	old := packIdle
	packIdle = d
	return func() { packIdle = old }
}
