package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpkeep/mcpkeep/crashtest"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// BenchmarkHTTPGetPersona measures get_persona calls per second over
// Streamable HTTP, with 1, 8 and 64 sessions (2025-11-25 clients) calling
// at once, on three servers: helios on the harness, with its limits, its
// routing and its guards; bare-http, the go-sdk's handler alone with one
// trivial tool of the same name that answers a fixed persona; and
// bare-http --helios-home, the go-sdk's handler alone with helios's own
// tools, which read the persona's file as helios does. helios/bare is the
// ratio issue 22 asks about; helios/bare-tools, against the same tools,
// is what the harness's transport costs. Each iteration runs 512 calls on
// each server, one after the other in an order that rotates, so that a
// busy moment of the machine slows all three; it reports the median rate
// of each (helios-calls/s, bare-calls/s, bare-tools-calls/s) and the
// ratios of the medians. On Linux it also reports the CPU time each
// server spent per call over all its rounds (helios-cpu-µs/call, ...,
// from /proc/<pid>/stat), which a busy machine moves far less than the
// rates: the client shares the machine's processors with the server, so
// a server's rate depends on its CPU time and the client's.
//
//	go test -run '^$' -bench HTTPGetPersona -benchtime 6x -count 6 ./cmd/helios
func BenchmarkHTTPGetPersona(b *testing.B) {
	helios := startHeliosHTTP(b)
	servers := []benchServer{helios, startBareHTTP(b, "bare"), startBareHTTP(b, "bare-tools", "--helios-home", helios.home)}
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			sessions := make([][]*mcp.ClientSession, len(servers))
			for i, s := range servers {
				sessions[i] = connectN(b, s.url, s.token, n)
			}
			rates := make([][]float64, len(servers))
			cpu := make([]time.Duration, len(servers))
			cpuOK := true
			calls := 0
			for i := 0; b.Loop(); i++ {
				for j := range servers {
					k := (i + j) % len(servers)
					before, ok1 := cpuTime(servers[k].pid)
					rates[k] = append(rates[k], callRate(b, sessions[k]))
					after, ok2 := cpuTime(servers[k].pid)
					cpu[k] += after - before
					cpuOK = cpuOK && ok1 && ok2
				}
				calls += callsPerRound
			}
			med := make([]float64, len(servers))
			for i, r := range rates {
				slices.Sort(r)
				med[i] = r[len(r)/2]
				b.ReportMetric(med[i], servers[i].name+"-calls/s")
				if cpuOK {
					b.ReportMetric(float64(cpu[i].Microseconds())/float64(calls), servers[i].name+"-cpu-µs/call")
				}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(med[0]/med[1], "helios/bare")
			b.ReportMetric(med[0]/med[2], "helios/bare-tools")
		})
	}
}

// benchServer is a server the HTTP benchmark calls.
type benchServer struct {
	name       string
	url, token string // token "" sends none
	pid        int
	home       string // helios's home; "" for bare-http
}

// cpuTime returns the CPU time, user and system, that process pid has
// used so far, from /proc/<pid>/stat (Linux); false where there is none.
func cpuTime(pid int) (time.Duration, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command's name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clockTick = 100 // USER_HZ, 100 on every Linux port Go supports
	return time.Duration(utime+stime) * time.Second / clockTick, true
}

// callsPerRound is how many get_persona calls one measurement makes,
// spread evenly over the sessions.
const callsPerRound = 512

// callRate makes callsPerRound calls over sessions at once and returns
// the calls per second.
func callRate(b *testing.B, sessions []*mcp.ClientSession) float64 {
	per := callsPerRound / len(sessions)
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	start := time.Now()
	for _, cs := range sessions {
		wg.Go(func() {
			for range per {
				res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "get_persona"})
				if err == nil && res.IsError {
					err = fmt.Errorf("get_persona: %s", mcptest.Text(res))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(per*len(sessions)) / took.Seconds()
}

// connectN connects n sessions of protocol 2025-11-25 to url, sending
// token if not empty, over one transport that keeps a connection per
// session.
func connectN(b *testing.B, url, token string, n int) []*mcp.ClientSession {
	b.Helper()
	var rt http.RoundTripper = &http.Transport{MaxIdleConnsPerHost: n}
	if token != "" {
		rt = mcptest.Bearer{Token: token, Base: rt}
	}
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
		cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		sessions[i] = cs
	}
	return sessions
}

// startHeliosHTTP starts helios serving HTTP alone on a fresh home; the
// benchmark's end stops it.
func startHeliosHTTP(b *testing.B) benchServer {
	b.Helper()
	home := filepath.Join(b.TempDir(), "home")
	p, err := crashtest.Start(context.Background(), crashtest.Cmd{Path: heliosBin,
		Args: []string{"--home", home, "--registry", "", "--http", "127.0.0.1:0", "--no-stdio"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Kill(); p.Wait() })
	deadline := time.Now().Add(hangAfter)
	for {
		st, err := statefile.Read(filepath.Join(home, statefile.FileName))
		if err == nil && st.PID == p.Pid() && st.Status == statefile.StatusReady {
			return benchServer{name: "helios", url: st.HTTP.URL, token: st.Token, pid: p.Pid(), home: home}
		}
		if p.Exited() || time.Now().After(deadline) {
			b.Fatalf("helios did not get ready; stderr:\n%s", p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startBareHTTP starts bare-http with args, to be reported as name; the
// benchmark's end stops it.
func startBareHTTP(b *testing.B, name string, args ...string) benchServer {
	b.Helper()
	p, err := crashtest.Start(context.Background(), crashtest.Cmd{Path: bareHTTPBin, Args: args})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Kill(); p.Wait() })
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		b.Fatalf("bare-http printed no URL: %v; stderr:\n%s", err, p.Stderr())
	}
	return benchServer{name: name, url: strings.TrimSpace(line), pid: p.Pid()}
}
