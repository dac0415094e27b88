package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/diskfloor"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// BenchmarkColdStart measures spawn to initialize response over stdio, on
// a home installed beforehand: helios on the harness, and bare-helios, the
// same tools on the same files with the go-sdk alone. The ratio of the two
// is the harness's start-up cost. Each iteration starts both, one after
// the other (which goes first alternates), so that both see the same
// machine: a busy moment slows the pair, not one side of the comparison,
// as it did when each ran as a sub-benchmark of its own. It reports the
// median time of each (helios-ns/op, bare-ns/op: a median, since a few
// starts that the machine delayed by many milliseconds would make a mean
// say little) and the ratio of the two (helios/bare); the shutdown after
// each response is not timed. It does so on a home just installed, and on
// one with 1,000 commits of history (packed as helios packs them), whose
// start must cost no more: a home lives long.
//
//	go test -run '^$' -bench ColdStart -count 10 ./cmd/helios
func BenchmarkColdStart(b *testing.B) {
	for _, commits := range []int{0, 1000} {
		home := filepath.Join(b.TempDir(), "home")
		install := exec.Command(heliosBin, "--home", home, "--registry", "") // stdin at EOF: install, then stop
		if out, err := install.CombinedOutput(); err != nil {
			b.Fatalf("install the home: %v\n%s", err, out)
		}
		addHistory(b, home, commits)
		// Building the history leaves the disk busy writing it back for
		// a while, which would slow helios's fsyncs (bare-helios makes
		// none) and charge the set-up to the harness.
		syscall.Sync()
		registry := filepath.Join(b.TempDir(), "servers.json")
		helios := []string{heliosBin, "--home", home, "--registry", registry}
		bare := []string{bareBin, "--home", home}
		b.Run(fmt.Sprintf("history=%d", commits), func(b *testing.B) {
			var h, r []time.Duration
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					h = append(h, coldStart(b, helios))
					r = append(r, coldStart(b, bare))
				} else {
					r = append(r, coldStart(b, bare))
					h = append(h, coldStart(b, helios))
				}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(median(h)), "helios-ns/op")
			b.ReportMetric(float64(median(r)), "bare-ns/op")
			b.ReportMetric(float64(median(h))/float64(median(r)), "helios/bare")
		})
	}
}

// median returns the middle of ds (the upper one of an even count),
// sorting ds.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// addHistory commits n changes of a preference to the home's default
// persona, as helios would, holding the home lock, with gitstore's default
// packing.
func addHistory(b *testing.B, home string, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	lock, err := lifecycle.TryLock(home)
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Unlock()
	store, err := gitstore.Open(filepath.Join(home, "config"), &gitstore.Options{HoldsLock: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	path := filepath.Join(home, "config", "personas", "default.yaml")
	for i := range n {
		var p helios.Persona
		if err := atomicfile.ReadYAMLStrict(path, &p); err != nil {
			b.Fatal(err)
		}
		p.Preferences[fmt.Sprintf("k%d", i%20)] = fmt.Sprintf("v%d", i)
		if err := atomicfile.WriteYAML(path, p, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := store.Commit(fmt.Sprintf("update_preference default.k%d", i%20)); err != nil {
			b.Fatal(err)
		}
	}
}

// coldStart starts the command and returns the time to its answer to
// initialize; it then closes its stdin and waits for it to exit.
func coldStart(b *testing.B, argv []string) time.Duration {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(stdin, mcptest.Initialize+"\n"); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	took := time.Since(start)
	var resp struct {
		ID     int `json:"id"`
		Result struct {
			ServerInfo struct{ Name string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err != nil || json.Unmarshal(line, &resp) != nil || resp.Result.ServerInfo.Name != "helios" {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatalf("%s: no initialize response (%v): %q\nstderr:\n%s", filepath.Base(argv[0]), err, line, &stderr)
	}
	stdin.Close()
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%s did not stop cleanly: %v\nstderr:\n%s", filepath.Base(argv[0]), err, &stderr)
	}
	return took
}

// TestBareHeliosIsTheReference: the benchmark's reference serves the same
// tools as helios, with the same schemas, on a home helios installed.
func TestBareHeliosIsTheReference(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	tools := func(argv ...string) []*mcp.Tool {
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: exec.Command(argv[0], argv[1:]...)}, nil)
		require.NoError(t, err)
		list, err := cs.ListTools(t.Context(), nil)
		require.NoError(t, err)
		p := mcptest.Call[helios.Persona](t, cs, "get_persona", nil)
		assert.Equal(t, "default", p.Name, "it reads the home's files")
		require.NoError(t, cs.Close())
		return list.Tools
	}
	want := tools(heliosBin, "--home", home, "--registry", "")
	got := tools(bareBin, "--home", home)
	require.Len(t, got, len(toolNames))
	assert.Equal(t, want, got)
}

// BenchmarkStdioCalls measures one tool call at a time over stdio to a
// running helios: update_preference (a durable change: each sets a new
// value of one of 20 keys of the default persona) beside get_config (a
// read), from request written to response read. It reports the median,
// 99th percentile and largest call besides the mean; 5,000 calls show
// whether packing, now off the change path, still stalls one.
//
// The disk has a tail of its own (a raw durable replace now and then takes
// 10-100 times its median), so each call is interleaved with one raw
// durable replace beside the home (atomicfile's BenchmarkRawFloor loop:
// create, write 1 KiB, fsync, rename, fsync the directory), and the floor's
// median, 99th percentile and largest are reported beside the call's. A
// slow call is one over 10 times the calls' median (slow-calls); it is put
// down to the disk (slow-disk) when a replace next to it, just before or
// just after, took over 10 times the floor's median; the others are the
// toolkit's (slow-ours), and their call numbers are logged:
//
//	go test -run '^$' -bench StdioCalls -benchtime 5000x -count 3 ./cmd/helios
func BenchmarkStdioCalls(b *testing.B) {
	for _, tool := range []string{"update_preference", "get_config"} {
		b.Run("tool="+tool, func(b *testing.B) {
			home := filepath.Join(b.TempDir(), "home")
			cmd := exec.Command(heliosBin, "--home", home, "--registry", "")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReader(stdout)
			call := func(line string) []byte {
				if _, err := io.WriteString(stdin, line); err != nil {
					b.Fatalf("write: %v\nstderr:\n%s", err, &stderr)
				}
				resp, err := r.ReadBytes('\n')
				if err != nil {
					b.Fatalf("read: %v\nstderr:\n%s", err, &stderr)
				}
				return resp
			}
			call(mcptest.Initialize + "\n")
			if _, err := io.WriteString(stdin, mcptest.Initialized+"\n"); err != nil {
				b.Fatal(err)
			}
			floorDir := filepath.Join(filepath.Dir(home), "floor")
			if err := os.Mkdir(floorDir, 0o700); err != nil {
				b.Fatal(err)
			}
			ds := make([]time.Duration, 0, 5000)
			starts := make([]time.Time, 0, 5000)
			floors := make([]time.Duration, 0, 5001)
			for i := 0; b.Loop(); i++ {
				floors = append(floors, rawReplace(b, floorDir, i))
				args := map[string]any{}
				if tool == "update_preference" {
					args = map[string]any{"key": fmt.Sprintf("k%d", i%20), "value": fmt.Sprintf("v%d", i)}
				}
				line := mcptest.ToolCall(b, i+1, tool, args)
				start := time.Now()
				resp := call(line)
				ds, starts = append(ds, time.Since(start)), append(starts, start)
				if bytes.Contains(resp, []byte(`"isError":true`)) || !bytes.Contains(resp, []byte(`"result"`)) {
					b.Fatalf("%s: %s", tool, resp)
				}
			}
			stdin.Close()
			io.Copy(io.Discard, r)
			if err := cmd.Wait(); err != nil {
				b.Fatalf("helios did not stop cleanly: %v\nstderr:\n%s", err, &stderr)
			}
			floors = append(floors, rawReplace(b, floorDir, len(ds)))
			reportTail(b, ds, floors, callsAt(starts, ds, packTimes(stderr.String())))
		})
	}
}

// packTimes returns when helios logged that it had packed objects, from
// its stderr (slog's text format, to the millisecond).
func packTimes(stderr string) []time.Time {
	var out []time.Time
	for line := range strings.Lines(stderr) {
		if !strings.Contains(line, "gitstore: packed") {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// callsAt returns, for each time of ts, the number of the call that was
// running or had last ended then (calls started at starts and took ds).
func callsAt(starts []time.Time, ds []time.Duration, ts []time.Time) []int {
	var out []int
	for _, t := range ts {
		i, _ := slices.BinarySearchFunc(starts, t, func(s, t time.Time) int { return s.Compare(t) })
		out = append(out, max(i-1, 0))
	}
	return out
}

// reportTail reports the median, 99th percentile and largest of the calls
// ds and of the raw replaces floors (floors[i] ran just before call i and
// floors[i+1] just after), and how many calls were slow, for the disk or
// for the toolkit (BenchmarkStdioCalls); it logs the toolkit's 20 slowest
// calls, marking those during which a pack was finished (packs: the
// numbers of the calls running when helios logged a pack).
func reportTail(b *testing.B, ds, floors []time.Duration, packs []int) {
	quantiles := func(xs []time.Duration) (p50, p99, max time.Duration) {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2], s[len(s)*99/100], s[len(s)-1]
	}
	p50, p99, most := quantiles(ds)
	f50, f99, fmost := quantiles(floors)
	b.ReportMetric(float64(p50), "p50-ns/op")
	b.ReportMetric(float64(p99), "p99-ns/op")
	b.ReportMetric(float64(most), "max-ns/op")
	b.ReportMetric(float64(f50), "floor-p50-ns/op")
	b.ReportMetric(float64(f99), "floor-p99-ns/op")
	b.ReportMetric(float64(fmost), "floor-max-ns/op")
	slow, disk := 0, 0
	var ours []int
	for i, d := range ds {
		if d <= 10*p50 {
			continue
		}
		slow++
		if max(floors[i], floors[i+1]) > 10*f50 {
			disk++
			continue
		}
		ours = append(ours, i)
	}
	b.ReportMetric(float64(slow), "slow-calls")
	b.ReportMetric(float64(disk), "slow-disk")
	b.ReportMetric(float64(len(ours)), "slow-ours")
	slices.SortFunc(ours, func(i, j int) int { return int(ds[j] - ds[i]) })
	var list []string
	for _, i := range ours[:min(len(ours), 20)] {
		pack := ""
		if slices.Contains(packs, i) {
			pack = ", a pack ended"
		}
		list = append(list, fmt.Sprintf("#%d %v (floor %v, %v%s)", i, ds[i].Round(time.Microsecond),
			floors[i].Round(time.Microsecond), floors[i+1].Round(time.Microsecond), pack))
	}
	if len(list) > 0 {
		b.Logf("slowest calls over 10x the median (%v) with no slow replace beside them: %s", p50, strings.Join(list, ", "))
	}
	if len(packs) > 0 {
		b.Logf("packs ended during calls %v", packs)
	}
}

// rawReplace makes one durable replace of a 1 KiB file in dir, as
// atomicfile's BenchmarkRawFloor does, and returns how long it took.
func rawReplace(b *testing.B, dir string, i int) time.Duration {
	d, err := diskfloor.Replace(dir, i)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
