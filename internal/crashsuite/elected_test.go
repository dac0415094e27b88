package crashsuite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// The elected workload runs helios on the suite's home with its writer
// elected through a real etcd (issue 15's --etcd), alone: once it is the
// active writer, its client updates and closes stdin, so the points of
// taking office, of acknowledging a change and of resigning fire. Each
// iteration campaigns under a name of its own, so that a lease a killed
// process left does not hold the next one up for its TTL. The restart
// after the crash runs without etcd: what is checked is the home.

// electedTTL is the lease of the elected workload's server.
const electedTTL = "1s"

// isElectedPoint reports whether failpoint name needs the elected
// workload.
func isElectedPoint(name string) bool {
	switch name {
	case "lifecycle.elected-before-catch-up", "lifecycle.before-ack", "lifecycle.before-resign":
		return true
	}
	return false
}

// startEtcd starts the etcd of the elected workload. Outside CI, without
// an etcd binary, the suite runs without that workload and says so; in CI
// etcdtest fails the test.
func (s *suite) startEtcd() {
	if _, err := etcdtest.Binary(); err != nil && os.Getenv("CI") == "" {
		s.t.Logf("crash suite: %v: the points of the elected workload are not crashed", err)
		s.noEtcd = true
		return
	}
	s.etcd = etcdtest.Start(s.t, nil)
}

// launchElected starts helios on the iteration's home as a candidate in
// the suite's etcd, failpoints armed, and returns once it is the active
// writer, or has exited (a point before it serves as the writer fired).
func (s *suite) launchElected(ctx context.Context, it *crashtest.Iteration, failpoints string) (*crashtest.Process, error) {
	cmd := s.cmd(s.cur.home, failpoints)
	cmd.Args = append(cmd.Args, "--etcd", s.etcd.URL, "--etcd-ttl", electedTTL, "--etcd-name", fmt.Sprintf("crash-%d", it.N))
	p, err := crashtest.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	s.cur.client = newRPC(p.Stdin(), p.Stdout())
	if err := awaitActive(s.cur.home, p); err != nil {
		p.Kill()
		p.Wait()
		return nil, fmt.Errorf("%w; stderr:\n%s", err, p.Stderr())
	}
	return p, nil
}

// awaitActive polls h's state file until it names p as the active writer,
// or p has exited.
func awaitActive(h *home, p *crashtest.Process) error {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := statefile.Read(filepath.Join(h.dir, statefile.FileName))
		if err == nil && st.PID == p.Pid() && st.Cluster != nil && st.Cluster.Role == statefile.RoleActive {
			return nil
		}
		if p.Exited() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server was not the active writer after a minute (last read: %v, %+v)", err, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
