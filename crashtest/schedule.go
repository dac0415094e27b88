package crashtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
)

// SeedEnvVar is the environment variable SeedFromEnv reads. Set it to the
// seed a failure message printed to replay that run's schedule.
const SeedEnvVar = "MCPKEEP_CRASH_SEED"

// Schedule is a seeded source of the random choices a crash suite makes:
// kill delays, failpoints, workload sizes. Two schedules built from one seed
// return the same sequence of values for the same sequence of calls, on any
// machine, so a failing run can be replayed from its printed seed. A
// Schedule is not safe for concurrent use.
type Schedule struct {
	seed int64
	r    *rand.Rand
}

// NewSchedule returns a schedule drawn from seed.
func NewSchedule(seed int64) *Schedule {
	// PCG's output for a given state is specified, unlike the global source.
	return &Schedule{seed: seed, r: rand.New(rand.NewPCG(uint64(seed), 0x6d63706b656570))}
}

// Seed returns the seed the schedule was built from.
func (s *Schedule) Seed() int64 { return s.seed }

// Intn returns a value in [0, n). It returns 0 when n <= 0.
func (s *Schedule) Intn(n int) int {
	if n <= 0 {
		return 0
	}
	return s.r.IntN(n)
}

// Delay returns a duration in [min, max], both ends included. It returns min
// when max <= min.
func (s *Schedule) Delay(min, max time.Duration) time.Duration {
	if max <= min {
		return min
	}
	return min + time.Duration(s.r.Int64N(int64(max-min)+1))
}

// Pick returns one of names, or "" when names is empty.
func (s *Schedule) Pick(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[s.r.IntN(len(names))]
}

// SeedFromEnv returns the seed in the environment variable SeedEnvVar, or,
// when it is unset or empty, a new seed from the clock (never 0). It returns
// an error naming the variable when the value is not a decimal integer.
func SeedFromEnv() (int64, error) {
	if v := strings.TrimSpace(os.Getenv(SeedEnvVar)); v != "" {
		seed, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("crashtest: %s=%q: want the decimal seed a failed run printed, or unset it for a new one", SeedEnvVar, v)
		}
		return seed, nil
	}
	seed := time.Now().UnixNano()
	if seed == 0 {
		seed = 1
	}
	return seed, nil
}
