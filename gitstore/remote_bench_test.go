package gitstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/internal/testserver/gitremote"
)

// benchFiles is the config a remote benchmark's home starts with.
func benchFiles() map[string]string {
	files := map[string]string{}
	for _, p := range configFiles {
		files[p] = "name: " + filepath.Base(p) + "\n"
	}
	return files
}

// cpuTime returns the processor time this process and its waited-for
// children (the git CLI, the HTTP server's git http-backend) have used.
func cpuTime(b *testing.B) time.Duration {
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatal(err)
	}
	var d time.Duration
	for _, tv := range []syscall.Timeval{self.Utime, self.Stime, children.Utime, children.Stime} {
		d += time.Duration(tv.Nano())
	}
	return d
}

// reportCPU reports the processor time per operation since start as
// cpu-ns/op: on a shared machine it moves less with the load than the
// wall time does.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRemoteCommit times one acknowledged change of one file, as
// issue 15 asks: with no remote; in async mode (the commit is durable
// here; Run pushes in the background, to a local HTTP remote, and its
// pushes share the machine with the commits); in sync mode to the same
// kind of remote (the commit and its push); and, beside sync mode, the
// git CLI committing the same change and pushing it with git push to a
// remote of its own served the same way. Each reports cpu-ns/op beside
// the wall time: the processor time of the process and of its children (the
// server's git http-backend, the CLI), the pushes of async mode included.
func BenchmarkRemoteCommit(b *testing.B) {
	stage := func(b *testing.B, s *gitstore.Store, i int) {
		c, err := s.Stage(fmt.Sprintf("bench %d", i), []gitstore.Change{{Path: "prefs.yaml", Data: fmt.Appendf(nil, "n: %d\n", i)}})
		if err != nil || c == nil {
			b.Fatalf("stage %d: %v", i, err)
		}
		if err := c.Wait(); err != nil {
			b.Fatalf("change %d: %v", i, err)
		}
	}
	b.Run("mode=none", func(b *testing.B) {
		s := home(b, benchFiles())
		i, cpu := 0, cpuTime(b)
		for b.Loop() {
			stage(b, s, i)
			i++
		}
		reportCPU(b, cpu)
	})
	b.Run("mode=async", func(b *testing.B) {
		s := home(b, benchFiles())
		r := attach(b, s, gitremote.Serve(b, gitremote.Bare(b), nil).URL(), nil)
		if _, err := r.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		i, cpu := 0, cpuTime(b)
		for b.Loop() {
			stage(b, s, i)
			i++
		}
		reportCPU(b, cpu)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
	b.Run("mode=sync/impl=gitstore", func(b *testing.B) {
		s := home(b, benchFiles())
		r := attach(b, s, gitremote.Serve(b, gitremote.Bare(b), nil).URL(), &gitstore.RemoteOptions{Mode: gitstore.RemoteSync})
		if _, err := r.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
		i, cpu := 0, cpuTime(b)
		for b.Loop() {
			stage(b, s, i)
			i++
		}
		reportCPU(b, cpu)
	})
	// The CLI at its default durability (it fsyncs nothing) and with
	// core.fsync=all, as gitstore fsyncs its commits.
	for _, cli := range []struct{ name, fsync string }{{"git-cli", "none"}, {"git-cli-fsync", "all"}} {
		b.Run("mode=sync/impl="+cli.name, func(b *testing.B) {
			bare := gitremote.Bare(b)
			url := gitremote.Serve(b, bare, nil).URL()
			dir := b.TempDir()
			gitCLI(b, dir, "init", "-q", "--initial-branch=main")
			for p, d := range benchFiles() {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, p), []byte(d), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			gitCLI(b, dir, "add", "-A")
			gitCLI(b, dir, "commit", "-q", "-m", "first")
			gitCLI(b, dir, "push", "-q", url, "main")
			i, cpu := 0, cpuTime(b)
			for b.Loop() {
				if err := os.WriteFile(filepath.Join(dir, "prefs.yaml"), fmt.Appendf(nil, "n: %d\n", i), 0o644); err != nil {
					b.Fatal(err)
				}
				gitCLI(b, dir, "-c", "core.fsync="+cli.fsync, "-c", "gc.autoDetach=false", "commit", "-q", "-a", "-m", fmt.Sprintf("bench %d", i))
				gitCLI(b, dir, "push", "-q", url, "main")
				i++
			}
			reportCPU(b, cpu)
		})
	}
}
