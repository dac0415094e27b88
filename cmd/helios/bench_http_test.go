package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
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
// ratios of the medians.
//
//	go test -run '^$' -bench HTTPGetPersona -benchtime 6x -count 6 ./cmd/helios
func BenchmarkHTTPGetPersona(b *testing.B) {
	heliosURL, token, home := startHeliosHTTP(b)
	servers := []struct {
		name     string
		url, tok string
	}{
		{"helios", heliosURL, token},
		{"bare", startBareHTTP(b), ""},
		{"bare-tools", startBareHTTP(b, "--helios-home", home), ""},
	}
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			sessions := make([][]*mcp.ClientSession, len(servers))
			for i, s := range servers {
				sessions[i] = connectN(b, s.url, s.tok, n)
			}
			rates := make([][]float64, len(servers))
			for i := 0; b.Loop(); i++ {
				for j := range servers {
					k := (i + j) % len(servers)
					rates[k] = append(rates[k], callRate(b, sessions[k]))
				}
			}
			med := make([]float64, len(servers))
			for i, r := range rates {
				slices.Sort(r)
				med[i] = r[len(r)/2]
				b.ReportMetric(med[i], servers[i].name+"-calls/s")
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(med[0]/med[1], "helios/bare")
			b.ReportMetric(med[0]/med[2], "helios/bare-tools")
		})
	}
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

// startHeliosHTTP starts helios serving HTTP alone on a fresh home and
// returns its URL, its token and the home; the benchmark's end stops it.
func startHeliosHTTP(b *testing.B) (url, token, home string) {
	b.Helper()
	home = filepath.Join(b.TempDir(), "home")
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
			return st.HTTP.URL, st.Token, home
		}
		if p.Exited() || time.Now().After(deadline) {
			b.Fatalf("helios did not get ready; stderr:\n%s", p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startBareHTTP starts bare-http with args and returns its URL; the
// benchmark's end stops it.
func startBareHTTP(b *testing.B, args ...string) string {
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
	return strings.TrimSpace(line)
}
