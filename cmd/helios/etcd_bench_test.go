package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/etcdtest"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// BenchmarkEtcdFailover measures a failover between two hosts under one
// etcd (TTL etcdTTL): from the SIGKILL of the active writer to the first
// change the standby acknowledges, its client retrying every 10 ms. Each
// iteration kills the host that is active, measures, and starts the
// killed one again as the standby. It reports the median and the 99th
// percentile (p50-ms, p99-ms), the TTL (ttl-ms), and the median past the
// TTL (p50-over-ttl-ms). A killed writer's lease runs out between TTL
// after its last renewal and TTL after the kill, plus etcd's check of
// expired leases (every 500 ms).
//
//	go test -run '^$' -bench EtcdFailover -benchtime 20x ./cmd/helios
func BenchmarkEtcdFailover(b *testing.B) {
	benchFailover(b, nil)
}

// BenchmarkEtcdFailoverRemote is BenchmarkEtcdFailover with the homes
// replicated through a git remote over HTTP in sync mode: a failover
// includes the new writer's catch-up fetch, and its first change is
// pushed before it is acknowledged. The second host's config starts as
// the remote's history (a clone).
//
//	go test -run '^$' -bench EtcdFailoverRemote -benchtime 20x ./cmd/helios
func BenchmarkEtcdFailoverRemote(b *testing.B) {
	bare := gitremote.Bare(b)
	benchFailover(b, []string{"--remote", gitremote.Serve(b, bare, nil).URL(), "--remote-mode", "sync"})
}

// benchFailover runs a failover benchmark with helios flags extra; with
// any, host b's config starts as a clone of host a's after its first
// change, which is what the remote has.
func benchFailover(b *testing.B, extra []string) {
	srv := etcdtest.Start(b, nil)
	root := b.TempDir()
	hosts := []*host{benchHost(b, root, "a", srv.URL, extra...), nil}
	waitRole(b, hosts[0], statefile.RoleActive)
	if extra != nil {
		firstChange(b, hosts[0]) // a's history reaches the remote
		dir := filepath.Join(root, "b", ".helios")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		gitremote.Run(b, dir, "clone", "-q", filepath.Join(hosts[0].home, "config"), "config")
	}
	hosts[1] = benchHost(b, root, "b", srv.URL, extra...)
	waitRole(b, hosts[1], statefile.RoleStandby)
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		active, standby := hosts[i%2], hosts[(i+1)%2]
		if active.role() != statefile.RoleActive {
			b.Fatalf("iteration %d: %s is not the active writer (%q)", i, active.name, active.role())
		}
		killed := time.Now()
		active.Kill()
		active.Wait()
		firstChange(b, standby)
		took = append(took, time.Since(killed))
		hosts[i%2] = benchHost(b, root, active.name, srv.URL, extra...)
		waitRole(b, hosts[i%2], statefile.RoleStandby)
	}
	slices.Sort(took)
	p := func(q float64) float64 {
		return float64(took[min(len(took)-1, int(q*float64(len(took))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	b.ReportMetric(float64(etcdTTL.Milliseconds()), "ttl-ms")
	b.ReportMetric(p(0.5)-float64(etcdTTL.Milliseconds()), "p50-over-ttl-ms")
	b.ReportMetric(0, "ns/op")
}

// benchHost starts (again) host name under root and waits for its state
// file. The benchmark's end kills it.
func benchHost(b *testing.B, root, name, etcdURL string, extra ...string) *host {
	b.Helper()
	h, err := startHostNoCleanup(b, root, name, etcdURL, "", extra...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.stop)
	deadline := time.Now().Add(hangAfter)
	for {
		st, err := statefile.Read(filepath.Join(h.home, statefile.FileName))
		if err == nil && st.PID == h.Pid() && st.Status == statefile.StatusReady {
			h.st = st
			return h
		}
		if h.Exited() || time.Now().After(deadline) {
			b.Fatalf("%s did not start: %v\n%s", name, h.Wait(), h.Stderr())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitRole(b *testing.B, h *host, role string) {
	b.Helper()
	deadline := time.Now().Add(hangAfter)
	for h.role() != role {
		if time.Now().After(deadline) {
			b.Fatalf("%s is not %s after %v", h.name, role, hangAfter)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// firstChange connects to h and changes a preference, again every 10 ms
// until the change is acknowledged.
func firstChange(b *testing.B, h *host) {
	b.Helper()
	deadline := time.Now().Add(hangAfter)
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
	for ; time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: h.st.HTTP.URL,
			HTTPClient: &http.Client{Transport: mcptest.Bearer{Token: h.st.Token}}}, nil)
		if err != nil {
			continue // a standby still: 503
		}
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "update_preference",
			Arguments: map[string]string{"key": "tone", "value": time.Now().Format(time.RFC3339Nano)}})
		cs.Close()
		if err == nil && !res.IsError {
			return
		}
	}
	b.Fatalf("%s acknowledged no change within %v", h.name, hangAfter)
}
