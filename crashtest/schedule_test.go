package crashtest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// draw makes one of each kind of choice n times.
func draw(s *crashtest.Schedule, n int) []any {
	names := []string{"a", "b", "c", "d"}
	var out []any
	for range n {
		out = append(out, s.Delay(time.Millisecond, 50*time.Millisecond), s.Intn(1000), s.Pick(names))
	}
	return out
}

func TestScheduleReplays(t *testing.T) {
	a, b := crashtest.NewSchedule(42), crashtest.NewSchedule(42)
	assert.Equal(t, int64(42), a.Seed())
	assert.Equal(t, draw(a, 100), draw(b, 100), "one seed, one sequence")
	assert.NotEqual(t, draw(crashtest.NewSchedule(42), 100), draw(crashtest.NewSchedule(43), 100))
}

func TestScheduleBounds(t *testing.T) {
	s := crashtest.NewSchedule(7)
	seen := map[string]bool{}
	for range 1000 {
		d := s.Delay(3*time.Millisecond, 5*time.Millisecond)
		assert.True(t, d >= 3*time.Millisecond && d <= 5*time.Millisecond, d)
		n := s.Intn(3)
		assert.True(t, n >= 0 && n < 3, n)
		seen[s.Pick([]string{"x", "y"})] = true
	}
	assert.Equal(t, map[string]bool{"x": true, "y": true}, seen)
	assert.Equal(t, 0, s.Intn(0))
	assert.Equal(t, time.Second, s.Delay(time.Second, time.Millisecond))
	assert.Empty(t, s.Pick(nil))
}

func TestSeedFromEnv(t *testing.T) {
	t.Setenv(crashtest.SeedEnvVar, " 12345 ")
	seed, err := crashtest.SeedFromEnv()
	require.NoError(t, err)
	assert.Equal(t, int64(12345), seed)

	t.Setenv(crashtest.SeedEnvVar, "-7")
	seed, err = crashtest.SeedFromEnv()
	require.NoError(t, err)
	assert.Equal(t, int64(-7), seed)

	t.Setenv(crashtest.SeedEnvVar, "soon")
	_, err = crashtest.SeedFromEnv()
	assert.Error(t, err)

	t.Setenv(crashtest.SeedEnvVar, "")
	seed, err = crashtest.SeedFromEnv()
	require.NoError(t, err)
	assert.NotZero(t, seed)
}
