package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/statefile"
)

// benchLaunch launches helios on home for a benchmark through go-sdk's
// CommandTransport and stops it when the benchmark ends.
func benchLaunch(b *testing.B, name, home string) *launched {
	b.Helper()
	l, err := launch(context.Background(), name, home, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.close)
	return l
}

// benchHome returns a home helios installed, with no server on it.
func benchHome(b *testing.B) string {
	b.Helper()
	home := filepath.Join(b.TempDir(), "home")
	if out, err := exec.Command(heliosBin, "--home", home, "--registry", "").CombinedOutput(); err != nil {
		b.Fatalf("install the home: %v\n%s", err, out)
	}
	return home
}

// BenchmarkAttachLaunch measures an attaching launch, spawn to its answer
// to initialize, on a home whose writer runs, beside bare-helios's cold
// start on the same home, each iteration starting both (alternating which
// goes first). It reports the median of each (attach-ns/op, bare-ns/op)
// and their ratio (attach/bare): an attaching launch opens no store and
// takes no lock, and the writer answers its initialize.
//
//	go test -run '^$' -bench AttachLaunch -count 10 ./cmd/helios
func BenchmarkAttachLaunch(b *testing.B) {
	home := benchHome(b)
	benchLaunch(b, "writer", home)
	attach := []string{heliosBin, "--home", home, "--registry", ""}
	bare := []string{bareBin, "--home", home}
	var a, r []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			a = append(a, coldStart(b, attach))
			r = append(r, coldStart(b, bare))
		} else {
			r = append(r, coldStart(b, bare))
			a = append(a, coldStart(b, attach))
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(median(a)), "attach-ns/op")
	b.ReportMetric(float64(median(r)), "bare-ns/op")
	b.ReportMetric(float64(median(a))/float64(median(r)), "attach/bare")
}

// BenchmarkAttachedCall measures one tool call through an attached process
// beside the same call on the writer's own client, one after the other in
// each iteration (alternating which goes first). It reports the median of
// each (attached-ns/op, writer-ns/op) and their difference (extra-ns/op):
// what the forwarder and the socket add to a call.
//
//	go test -run '^$' -bench AttachedCall -count 10 ./cmd/helios
func BenchmarkAttachedCall(b *testing.B) {
	for _, tool := range []string{"get_persona", "update_preference"} {
		b.Run("tool="+tool, func(b *testing.B) {
			home := benchHome(b)
			writer := benchLaunch(b, "writer", home)
			attached := benchLaunch(b, "attached", home)
			call := func(cs *mcp.ClientSession, i int) time.Duration {
				params := &mcp.CallToolParams{Name: tool}
				if tool == "update_preference" {
					params.Arguments = map[string]any{"key": "bench", "value": time.Now().Format(time.RFC3339Nano)}
				}
				start := time.Now()
				res, err := cs.CallTool(context.Background(), params)
				took := time.Since(start)
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %+v", tool, err, res)
				}
				return took
			}
			var w, a []time.Duration
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					w = append(w, call(writer.cs, i))
					a = append(a, call(attached.cs, i))
				} else {
					a = append(a, call(attached.cs, i))
					w = append(w, call(writer.cs, i))
				}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(median(a)), "attached-ns/op")
			b.ReportMetric(float64(median(w)), "writer-ns/op")
			b.ReportMetric(float64(median(a)-median(w)), "extra-ns/op")
		})
	}
}

// BenchmarkHandover measures a handover: the writer is SIGKILLed, and the
// time until a call of a surviving client (get_persona, sent at once, and
// again if it was in flight to the dead writer) is answered, the survivor
// having taken over. Each iteration kills the
// writer of the last and launches a new client for the next, so there are
// always a writer and a survivor. It reports the median and the 99th
// percentile (p50-ns/op, p99-ns/op).
//
//	go test -run '^$' -bench Handover -benchtime 50x ./cmd/helios
func BenchmarkHandover(b *testing.B) {
	home := benchHome(b)
	writer := benchLaunch(b, "c0", home)
	survivor := benchLaunch(b, "c1", home)
	if _, err := survivor.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_persona"}); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		awaitWriter(b, home, writer.cmd.Process.Pid)
		b.StartTimer()
		start := time.Now()
		if err := syscall.Kill(writer.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		for { // a call sent before the survivor saw the writer go fails with the outcome unknown
			res, err := survivor.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_persona"})
			if err == nil && !res.IsError {
				break
			}
			if !unknownOutcome(err) {
				b.Fatalf("the survivor's call after the handover: %v %+v\nstderr:\n%s", err, res, survivor.stderr)
			}
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		writer.close()
		writer, survivor = survivor, benchLaunch(b, "c"+strconv.Itoa(i+2), home)
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(took[len(took)/2]), "p50-ns/op")
	b.ReportMetric(float64(took[len(took)*99/100]), "p99-ns/op")
}

// awaitWriter waits until the home's state file names pid as the ready
// writer.
func awaitWriter(b *testing.B, home string, pid int) {
	b.Helper()
	deadline := time.Now().Add(hangAfter)
	for {
		st, err := statefile.Read(filepath.Join(home, statefile.FileName))
		if err == nil && st.PID == pid && st.Status == statefile.StatusReady {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("pid %d is not the home's writer after %v (%v)", pid, hangAfter, err)
		}
		time.Sleep(time.Millisecond)
	}
}
