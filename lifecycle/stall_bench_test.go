package lifecycle_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// rollups records when gitstore logged the end of a packing.
type rollups struct {
	mu   sync.Mutex
	ends []time.Time
}

func (r *rollups) Enabled(context.Context, slog.Level) bool { return true }
func (r *rollups) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == "gitstore: packed loose objects" {
		r.mu.Lock()
		r.ends = append(r.ends, rec.Time)
		r.mu.Unlock()
	}
	return nil
}
func (r *rollups) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *rollups) WithGroup(string) slog.Handler      { return r }

// BenchmarkUpdateStalls makes 6,000 Updates of one file in a row (10
// files, with Maintain, as BenchmarkUpdate) per iteration, which takes
// the home through the flushes' roll-up of packs (issue 20's stall). It
// reports the p50 and max change, max/p50, and how many changes took over
// 10x the p50 (slow), and logs each slow one with its distance from the
// end of the nearest roll-up (negative: before it ended; a roll-up of
// 12,000 objects encodes for about a second).
//
//	go test -run '^$' -bench UpdateStalls -count 6 ./lifecycle
func BenchmarkUpdateStalls(b *testing.B) {
	r := &rollups{}
	benchLog = slog.New(r)
	defer func() { benchLog = nil }()
	env := benchEnv(b, 10, "nested", 0)
	const n = 6000
	for b.Loop() {
		starts, took := make([]time.Time, n), make([]time.Duration, n)
		for i := range n {
			data := append(strconv.AppendInt(nil, int64(i), 10), kib...)
			starts[i] = time.Now()
			if _, err := env.Update(b.Context(), "set a", func(tx *lifecycle.Tx) error {
				return tx.WriteFile("a.yaml", data)
			}); err != nil {
				b.Fatal(err)
			}
			took[i] = time.Since(starts[i])
		}
		sorted := slices.Sorted(slices.Values(took))
		p50, most := sorted[n/2], sorted[n-1]
		r.mu.Lock()
		ends := slices.Clone(r.ends)
		r.mu.Unlock()
		slow := 0
		for i, d := range took {
			if d <= 10*p50 {
				continue
			}
			slow++
			near := time.Duration(1<<63 - 1)
			for _, e := range ends {
				if dist := starts[i].Sub(e); dist.Abs() < near.Abs() {
					near = dist
				}
			}
			if len(ends) == 0 {
				b.Logf("#%d took %v; no roll-up", i, d)
			} else {
				b.Logf("#%d took %v, %v from the nearest roll-up's end", i, d, near.Round(time.Millisecond))
			}
		}
		b.ReportMetric(float64(p50), "p50-ns/op")
		b.ReportMetric(float64(most), "max-ns/op")
		b.ReportMetric(float64(most)/float64(p50), "max/p50")
		b.ReportMetric(float64(slow), "slow")
		b.ReportMetric(float64(len(ends)), "rollups")
	}
}
