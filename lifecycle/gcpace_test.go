package lifecycle

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// gcPercent returns the garbage collector's pacing, leaving it as it is.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestPaceStartGC: Main's start defers the first collection (a higher
// pacing) and puts the process's pacing back, once; GOGC set by the person
// running the server is left alone.
func TestPaceStartGC(t *testing.T) {
	before := gcPercent()
	t.Run("default", func(t *testing.T) {
		t.Setenv("GOGC", "")
		done := paceStartGC()
		assert.Equal(t, startGCPercent, gcPercent(), "during the start")
		done()
		assert.Equal(t, before, gcPercent(), "after it")
		debug.SetGCPercent(before + 1)
		done() // a second call changes nothing
		assert.Equal(t, before+1, gcPercent())
		debug.SetGCPercent(before)
	})
	t.Run("GOGC set", func(t *testing.T) {
		t.Setenv("GOGC", "50")
		done := paceStartGC()
		assert.Equal(t, before, gcPercent(), "GOGC is the person's choice")
		done()
		assert.Equal(t, before, gcPercent())
	})
}
