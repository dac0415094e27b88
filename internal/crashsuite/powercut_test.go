package crashsuite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/crashtest"
)

// powerCutsEnv is the environment variable that sets the number of power
// cuts.
const powerCutsEnv = "MCPKEEP_POWER_CUTS"

// TestPowerCuts runs helios with its home on a loop-mounted ext4 image and
// cuts the power (EXT4_IOC_SHUTDOWN without flushing the journal) at a
// random moment of its start or of a stream of update_preference calls.
// Unlike a SIGKILL, this loses whatever was not fsynced. After each cut the
// image is remounted and helios restarted; every acknowledged value must be
// on disk and at its commit, and the home repaired: the start succeeds,
// config parses, git fsck and mcpkeep doctor are clean.
func TestPowerCuts(t *testing.T) {
	needRoot(t, "the power-cut test")
	b := binaries(t)
	cuts := count(t, powerCutsEnv, 20, 3)
	disk := newLoopDisk(t)
	seed, err := crashtest.SeedFromEnv()
	require.NoError(t, err)
	sched := crashtest.NewSchedule(seed)
	chk := checker{mcpkeep: b.mcpkeep, registry: filepath.Join(t.TempDir(), "servers.json")}
	h := newHome(filepath.Join(disk.mnt, "home"))
	cmd := crashtest.Cmd{Path: b.helios, Args: []string{"--home", h.dir, "--registry", chk.registry}}

	began := time.Now()
	lost, unrepaired, acked, done := 0, 0, 0, 0
	for n := range cuts {
		done++
		before := len(h.acks)
		lostNow, unrepairedNow := cutOnce(t, disk, cmd, h, chk, sched, n, seed)
		lost += lostNow
		if unrepairedNow {
			unrepaired++
		}
		acked += len(h.acks) - before
		if t.Failed() && (lostNow > 0 || unrepairedNow) {
			break // the home is broken: later cuts would only repeat it
		}
	}
	t.Logf("power cuts: %d cuts, %d acknowledged writes, %d lost, %d unrepaired homes, seed %d (%s=%d replays the schedule), %v",
		done, acked, lost, unrepaired, seed, crashtest.SeedEnvVar, seed, time.Since(began).Round(time.Second))
}

// cutOnce starts helios, cuts the power after a random delay, remounts,
// restarts and checks. It reports the lost acknowledged writes and whether
// the home was left unrepaired, each also a test error.
func cutOnce(t *testing.T, disk *loopDisk, cmd crashtest.Cmd, h *home, chk checker, sched *crashtest.Schedule, n int, seed int64) (lost int, unrepaired bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	fail := func(format string, args ...any) {
		t.Errorf("power cut %d (seed %d): %s", n, seed, fmt.Sprintf(format, args...))
	}
	// From the start: in the start-up, or after a few acknowledged writes.
	delay := sched.Delay(0, 300*time.Millisecond)
	p, err := crashtest.Start(ctx, cmd)
	require.NoError(t, err)
	var cutting atomic.Bool
	var once sync.Once
	var cutErr error
	cut := func() {
		once.Do(func() {
			cutting.Store(true)
			cutErr = disk.cut()
			p.Kill()
		})
	}
	timer := time.AfterFunc(delay, cut)

	c := newRPC(p.Stdin(), p.Stdout())
	tag := fmt.Sprintf("c%d", n)
	err = c.initialize()
	for err == nil {
		u := h.newUpdate(sched, tag)
		h.sent(u)
		var r *toolResult
		if r, err = c.call("update_preference", u); err != nil {
			break
		}
		if r.IsError && cutting.Load() {
			continue // the disk is gone: a failed call is the right answer
		}
		err = h.acked(u, r)
	}
	if !cutting.Load() {
		fail("helios went away before the power cut: %v; stderr:\n%s", err, p.Stderr())
	} else if err = ignoreGone(err); err != nil {
		fail("%v", err)
	}
	timer.Stop()
	cut()
	p.Wait()
	require.NoError(t, cutErr, "the power cut itself")

	require.NoError(t, disk.unmount())
	require.NoError(t, disk.mount())
	live, err := restartServer(ctx, cmd, h)
	if err != nil {
		fail("%v", err)
		return 0, true
	}
	var errs []error
	for _, e := range append(live, chk.check(ctx, h)...) {
		var le *lostError
		if errors.As(e, &le) {
			lost++
		} else {
			unrepaired = true
		}
		errs = append(errs, e)
	}
	for _, e := range errs {
		fail("after the cut %v into the run: %v", delay, e)
	}
	return lost, unrepaired
}
