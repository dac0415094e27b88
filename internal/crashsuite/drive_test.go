package crashsuite_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/lifecycle"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// ignoreGone drops errGone: a server dying under the workload is expected.
func ignoreGone(err error) error {
	if errors.Is(err, errGone) {
		return nil
	}
	return err
}

func (s *suite) drive(ctx context.Context, it *crashtest.Iteration, p *crashtest.Process) error {
	tag := fmt.Sprintf("i%d", it.N)
	var err error
	switch {
	case s.cur.att != nil && s.cur.kind == "failpoint":
		err = s.driveAttached(it, tag)
	case s.cur.att != nil:
		err = s.driveAttachedRandom(ctx, it, tag)
	case s.cur.kind == "failpoint":
		err = s.driveFailpoint(it, p, tag)
	case s.cur.kind == "eof" || s.cur.kind == "sigterm":
		err = s.collectBurst()
	default:
		if err = s.handshakeOnce(); err == nil {
			if s.cur.home.next {
				err = s.cur.client.drain()
			} else {
				err = stream(s.cur.client, s.cur.home, it.Schedule, tag, -1)
			}
		}
	}
	s.land(ctx, p)
	return ignoreGone(err)
}

func (s *suite) handshakeOnce() error {
	if s.cur.serving {
		return nil
	}
	return s.handshake()
}

// driveFailpoint starts a session, makes three to five updates (none on
// heliosnext, which has no update tool) and closes stdin, so the
// failpoint can fire at start-up, in an update or at shutdown.
func (s *suite) driveFailpoint(it *crashtest.Iteration, p *crashtest.Process, tag string) error {
	if err := s.handshake(); err != nil {
		return err
	}
	if !s.cur.home.next {
		if err := stream(s.cur.client, s.cur.home, it.Schedule, tag, 3+it.Schedule.Intn(3)); err != nil {
			return err
		}
	}
	p.Stdin().Close()
	return s.cur.client.drain()
}

// stream makes n update calls one at a time (all of them while the server
// lives when n < 0), recording each in h. It returns errGone when the
// server goes away, and another error for a violation.
func stream(c *rpc, h *home, sched *crashtest.Schedule, tag string, n int) error {
	for i := 0; n < 0 || i < n; i++ {
		u := h.newUpdate(sched, tag)
		h.sent(u)
		r, err := c.call("update_preference", u)
		if err != nil {
			return err
		}
		if err := h.acked(u, r); err != nil {
			return err
		}
	}
	return nil
}

// collectBurst reads the responses to a burst until the server is gone.
func (s *suite) collectBurst() error {
	c, h := s.cur.client, s.cur.home
	for len(s.cur.burst) > 0 {
		id, m, err := c.next()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(s.cur.burst, func(b sentUpdate) bool { return b.id == id })
		if i < 0 {
			continue
		}
		u := s.cur.burst[i].u
		s.cur.burst = slices.Delete(s.cur.burst, i, i+1)
		r, err := decodeTool(m)
		if err != nil {
			return err
		}
		if err := h.acked(u, r); err != nil {
			return err
		}
	}
	return c.drain()
}

// land records where a random kill landed, once the process is gone.
func (s *suite) land(ctx context.Context, p *crashtest.Process) {
	if s.cur.kind == "failpoint" {
		return
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		return
	}
	phase := "during start-up"
	switch {
	case !p.Killed():
		phase = "after a clean exit"
	case s.cur.kind == "eof" || s.cur.kind == "sigterm":
		phase = "during shutdown"
	case s.cur.serving:
		phase = "while serving"
	}
	s.landings[s.cur.kind+" "+phase]++
}

// landed describes where the random kills landed.
func (s *suite) landed() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.landings)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.landings[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// restart starts the server again without failpoints: it must come up,
// answer, pass the checks made while it serves, and stop cleanly at stdin
// EOF.
func (s *suite) restart(ctx context.Context, it *crashtest.Iteration) error {
	if err := s.stopSurvivor(); err != nil {
		s.cur.failed = true
		return fmt.Errorf("%s: %w", s.cur.scenario, err)
	}
	live, err := restartServer(ctx, s.cmd(s.cur.home, ""), s.cur.home)
	s.cur.live = live
	if err != nil {
		s.cur.failed = true
		return fmt.Errorf("%s: %w", s.cur.scenario, err)
	}
	return nil
}

// restartServer starts the server cmd describes on h, after a crash: it
// must come up and answer a read, and stop cleanly at stdin EOF. It returns
// what checkServing found while the server ran, and an error when the
// start or the stop failed.
func restartServer(ctx context.Context, cmd crashtest.Cmd, h *home) ([]error, error) {
	p, err := crashtest.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	fail := func(what string, err error) ([]error, error) {
		p.Kill()
		p.Wait()
		return nil, fmt.Errorf("the start after the crash: %s: %w; stderr:\n%s", what, err, p.Stderr())
	}
	c := newRPC(p.Stdin(), p.Stdout())
	if err := c.initialize(); err != nil {
		return fail("initialize", err)
	}
	tool := "get_config"
	if h.next {
		tool = "get_notes"
	}
	r, err := c.call(tool, map[string]any{})
	if err != nil {
		return fail(tool, err)
	}
	if r.IsError {
		return fail(tool, errors.New(r.Text()))
	}
	if err := awaitAnnounced(h, p); err != nil {
		return fail("the state file", err)
	}
	live := checkServing(h, p.Pid())
	p.Stdin().Close()
	if err := c.drain(); err != nil {
		live = append(live, err)
	}
	if err := p.Wait(); err != nil {
		return live, fmt.Errorf("the restarted server did not stop cleanly at stdin EOF: %w", err)
	}
	return live, nil
}

// awaitAnnounced waits until the state file names p as ready: a server
// answers before it writes its start-up files (the boot record, the state
// file, the registry entry), which it writes right after.
func awaitAnnounced(h *home, p *crashtest.Process) error {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := statefile.Read(filepath.Join(h.dir, statefile.FileName))
		if err == nil && st.PID == p.Pid() && st.Status == statefile.StatusReady {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("the server exited before its state file named it (last read: %v)", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no state file naming the server after a minute (last read: %v)", err)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *suite) check(ctx context.Context, it *crashtest.Iteration) error {
	errs := append(s.cur.live, s.checker.check(ctx, s.cur.home)...)
	if len(errs) == 0 {
		return nil
	}
	s.cur.failed = true
	for i, err := range errs {
		errs[i] = fmt.Errorf("%s: %w", s.cur.scenario, err)
	}
	return errors.Join(errs...)
}

// prepCrash crashes a server on h in its first update, between its
// barriers, so that the next start has an interrupted update to roll
// forward.
func (s *suite) prepCrash(ctx context.Context, h *home, it *crashtest.Iteration) error {
	spec := it.Schedule.Pick(prepPoints)
	p, err := crashtest.Start(ctx, s.cmd(h, spec))
	if err != nil {
		return err
	}
	c := newRPC(p.Stdin(), p.Stdout())
	err = c.initialize()
	if err == nil {
		// The counts of prepPoints start after the start-up files.
		err = awaitAnnounced(h, p)
	}
	if err == nil {
		err = stream(c, h, it.Schedule, fmt.Sprintf("i%dp", it.N), 5)
	}
	p.Kill()
	p.Wait()
	if err = ignoreGone(err); err != nil {
		return fmt.Errorf("preparatory crash %s: %w", spec, err)
	}
	for _, j := range []string{"mcpkeep-journal-0", "mcpkeep-journal-1"} {
		if fi, err := os.Stat(filepath.Join(h.configDir(), ".git", j)); err == nil && fi.Size() > 0 {
			return nil
		}
	}
	return fmt.Errorf("preparatory crash %s left no journal record in %s; stderr:\n%s", spec, h.dir, p.Stderr())
}

// usePacked makes a copy of the packed template the suite's home.
func (s *suite) usePacked(ctx context.Context) error {
	if s.packed == nil {
		tmpl, err := s.makePacked(ctx)
		if err != nil {
			return fmt.Errorf("make a home past the pack threshold: %w", err)
		}
		s.packed = tmpl
	}
	h := s.newHome()
	if err := copyTree(s.packed.dir, h.dir); err != nil {
		return err
	}
	s.replaceMain(s.packed.clone(h.dir))
	s.cur.home = s.main
	return nil
}

// upgradeHome copies the suite's home for heliosnext to upgrade.
func (s *suite) upgradeHome() (*home, error) {
	h := s.newHome()
	if err := copyTree(s.main.dir, h.dir); err != nil {
		return nil, err
	}
	c := s.main.clone(h.dir)
	c.next = true
	return c, nil
}

// makePacked makes, once per run, a helios home with more loose objects
// than gitstore.DefaultPackThreshold, so that the next commit packs. helios
// installs it; the commits are made like helios's, with gitstore under the
// home lock, but with packing off, on a tmpfs when there is one: 2 s,
// where 500 fsynced updates through helios take 8 s on this machine.
func (s *suite) makePacked(ctx context.Context) (*home, error) {
	parent := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "crashsuite-pack-")
	if err != nil {
		dir, err = os.MkdirTemp(s.dir, "pack-")
		if err != nil {
			return nil, err
		}
	}
	s.t.Cleanup(func() { os.RemoveAll(dir) })
	h := newHome(filepath.Join(dir, "home"))
	cmd := s.cmd(h, "")
	cmd.Stdin = strings.NewReader("")
	p, err := crashtest.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := p.Wait(); err != nil {
		return nil, err
	}
	lock, err := lifecycle.TryLock(h.dir)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	store, err := gitstore.Open(h.configDir(), &gitstore.Options{HoldsLock: true, PackThreshold: -1})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	for i := 0; looseObjects(h.configDir()) <= gitstore.DefaultPackThreshold; {
		for range 25 {
			u := update{Persona: personaNames[i%len(personaNames)], Key: prefKeys[i%len(prefKeys)], Value: fmt.Sprintf("pack.%d", i)}
			i++
			path := filepath.Join(h.configDir(), personaFile(u.Persona))
			var pr persona
			if err := atomicfile.ReadYAMLStrict(path, &pr); err != nil {
				return nil, err
			}
			pr.Preferences[u.Key] = u.Value
			if err := atomicfile.WriteYAML(path, pr, 0); err != nil {
				return nil, err
			}
			hash, err := store.Commit("update_preference " + u.slot())
			if err != nil {
				return nil, err
			}
			h.record(u, hash)
		}
	}
	return h, nil
}

// looseObjects counts the loose objects of the repository in dir.
func looseObjects(dir string) int {
	n := 0
	subdirs, _ := os.ReadDir(filepath.Join(dir, ".git", "objects"))
	for _, d := range subdirs {
		if len(d.Name()) == 2 && d.IsDir() {
			entries, _ := os.ReadDir(filepath.Join(dir, ".git", "objects", d.Name()))
			n += len(entries)
		}
	}
	return n
}

// copyTree copies the directory src to dst, keeping modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel(src, p))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm())
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm())
		}
		return nil
	})
}
