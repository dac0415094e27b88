package gitstore_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// The benchmarks compare gitstore with the git CLI on histories of 0, 1,000
// and 10,000 commits. Making 10,000 commits takes gitstore a minute or two
// (every commit is fsynced), so each history is built once per test
// process, by gitstore itself with its default packing, snapshotted at each
// size into a temporary directory, and every benchmark works on its own
// copy of a snapshot. Nothing of this runs without -bench.
//
// Sub-benchmarks are named history=N/impl=X, so that benchstat sets the
// implementations, or the history lengths, side by side:
//
//	go test -run '^$' -bench . -count 6 ./gitstore | tee gitstore.txt
//	benchstat -col /impl gitstore.txt
//	benchstat -col /history -filter '/impl:gitstore .name:(Commit OR ReadAt)' gitstore.txt
//
// BenchmarkSize reports the size of .git in its metrics, not in its time.

// historySizes are the history lengths the benchmarks compare.
var historySizes = []int{0, 1000, 10000}

// configFiles is the work tree every history versions: a small server
// config, one file of which each commit changes.
var configFiles = []string{
	"base.yaml", "prefs.yaml", "tools.yaml",
	"personas/default.yaml", "personas/concise.yaml", "personas/pirate.yaml",
	"personas/teacher.yaml", "personas/reviewer.yaml",
}

// history builds one repository commit by commit and snapshots it. It is
// shared by every benchmark of the process.
type history struct {
	opts *gitstore.Options

	mu      sync.Mutex
	dir     string // the repository being built
	store   *gitstore.Store
	commits int            // commits after the initial one
	snaps   map[int]string // commits → snapshot directory
	loose   map[int]string // commits → snapshot with a pack's worth of loose objects
}

var (
	cacheOnce sync.Once
	cacheDir  string
	cacheErr  error

	packed   = &history{}                                           // DefaultPackThreshold
	unpacked = &history{opts: &gitstore.Options{PackThreshold: -1}} // never packs
)

// TestMain removes the histories the benchmarks built.
func TestMain(m *testing.M) {
	code := m.Run()
	if cacheDir != "" {
		os.RemoveAll(cacheDir)
	}
	os.Exit(code)
}

func benchCache(b *testing.B) string {
	b.Helper()
	cacheOnce.Do(func() { cacheDir, cacheErr = os.MkdirTemp("", "gitstore-bench-") })
	if cacheErr != nil {
		b.Fatal(cacheErr)
	}
	return cacheDir
}

// edit changes one config file to a value it never had.
func edit(tb testing.TB, dir string, i int) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(configFiles[i%len(configFiles)]))
	if err := os.WriteFile(p, fmt.Appendf(nil, "name: %s\nrevision: %d\n", filepath.Base(p), i), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// snapshot returns a directory holding the history after n commits (on top
// of the initial one), building it on first use. Callers must not change
// it: copy it with clone.
func (h *history) snapshot(b *testing.B, n int) string {
	b.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if dir, ok := h.snaps[n]; ok {
		return dir
	}
	if h.store == nil {
		h.dir = filepath.Join(benchCache(b), fmt.Sprintf("history-%p", h))
		for _, f := range configFiles {
			p := filepath.Join(h.dir, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("name: "+filepath.Base(f)+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		s, err := gitstore.Init(h.dir, h.opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Commit("install"); err != nil {
			b.Fatal(err)
		}
		h.store, h.snaps, h.loose = s, map[int]string{}, map[int]string{}
	}
	if n < h.commits {
		b.Fatalf("no snapshot of %d commits: the history is at %d; use one of %v", n, h.commits, historySizes)
	}
	if n > 0 {
		b.Logf("building a history of %d commits with gitstore (once per process)", n)
	}
	for {
		// Snapshot every size on the way, whichever is asked for first.
		if _, ok := h.snaps[h.commits]; !ok && (h.commits == n || slices.Contains(historySizes, h.commits)) {
			snap := filepath.Join(benchCache(b), fmt.Sprintf("snap-%p-%d", h, h.commits))
			copyDir(b, h.dir, snap)
			h.snaps[h.commits] = snap
		}
		if h.commits == n {
			return h.snaps[n]
		}
		edit(b, h.dir, h.commits)
		if _, err := h.store.Commit(fmt.Sprintf("change %d", h.commits)); err != nil {
			b.Fatal(err)
		}
		h.commits++
	}
}

// withLoose returns a snapshot of the history after n commits and then as
// many more, made without packing, as it takes to pass
// DefaultPackThreshold loose objects: the repository as the Commit that
// packs finds it.
func (h *history) withLoose(b *testing.B, n int) string {
	b.Helper()
	snap := h.snapshot(b, n)
	h.mu.Lock()
	defer h.mu.Unlock()
	if dir, ok := h.loose[n]; ok {
		return dir
	}
	dir := snap + "-loose"
	copyDir(b, snap, dir)
	s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true, PackThreshold: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := n; diskUsage(b, filepath.Join(dir, ".git")).loose <= gitstore.DefaultPackThreshold; i++ {
		edit(b, dir, i)
		if _, err := s.Commit(fmt.Sprintf("loose %d", i)); err != nil {
			b.Fatal(err)
		}
	}
	h.loose[n] = dir
	return dir
}

// clone copies a snapshot into a directory of b's own.
func clone(b *testing.B, snap string) string {
	b.Helper()
	dst := filepath.Join(b.TempDir(), "config")
	copyDir(b, snap, dst)
	return dst
}

func copyDir(b *testing.B, src, dst string) {
	b.Helper()
	if out, err := exec.Command("cp", "-R", "-p", src, dst).CombinedOutput(); err != nil {
		b.Fatalf("cp %s %s: %v: %s", src, dst, err, out)
	}
}

// gitCLI runs the git CLI in dir, isolated from the user's and the
// system's configuration.
func gitCLI(b *testing.B, dir string, args ...string) []byte {
	b.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=mcpkeep", "GIT_AUTHOR_EMAIL=mcpkeep@localhost",
		"GIT_COMMITTER_NAME=mcpkeep", "GIT_COMMITTER_EMAIL=mcpkeep@localhost")
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// BenchmarkCommit commits one changed file on top of a history, with
// gitstore (fsynced) and with the git CLI (git add -A && git commit, at its
// default durability, and with core.fsync=all). Each side works on its own copy of the same
// history. Neither packs here: gitstore packs in one Commit out of every
// few hundred and the CLI runs git gc --auto about as rarely, so the
// packing is measured apart, by BenchmarkPack.
func BenchmarkCommit(b *testing.B) {
	for _, n := range historySizes {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			b.Run("impl=gitstore", func(b *testing.B) {
				dir := clone(b, packed.snapshot(b, n))
				s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true, PackThreshold: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				i := 0
				for b.Loop() {
					edit(b, dir, n+i)
					h, err := s.Commit(fmt.Sprintf("bench %d", i))
					if err != nil || h == "" {
						b.Fatalf("commit %d: %q, %v", i, h, err)
					}
					i++
				}
			})
			// The CLI at its default durability (it fsyncs nothing), and
			// with core.fsync=all, its own way of making a commit survive
			// a power cut (git 2.36 and later), for comparison.
			for _, cli := range []struct{ name, fsync string }{{"git-cli", "none"}, {"git-cli-fsync", "all"}} {
				b.Run("impl="+cli.name, func(b *testing.B) {
					dir := clone(b, packed.snapshot(b, n))
					i := 0
					for b.Loop() {
						edit(b, dir, n+i)
						gitCLI(b, dir, "-c", "core.fsync="+cli.fsync, "add", "-A")
						gitCLI(b, dir, "-c", "core.fsync="+cli.fsync, "-c", "gc.autoDetach=false", "commit", "-q", "-m", fmt.Sprintf("bench %d", i))
						i++
					}
				})
			}
		})
	}
}

// readRevs returns up to 64 full hashes spread over the history in dir,
// for ReadAt to cycle through so that it does not read one cached commit.
func readRevs(b *testing.B, dir string) []string {
	b.Helper()
	all := strings.Fields(string(gitCLI(b, dir, "rev-list", "HEAD")))
	step := max(1, len(all)/64)
	var revs []string
	for i := 0; i < len(all); i += step {
		revs = append(revs, all[i])
	}
	return revs
}

// BenchmarkReadAt reads one file at a commit of the history, cycling over
// commits spread from HEAD back to the first: with an open gitstore (as a
// server holds it) and with git show.
func BenchmarkReadAt(b *testing.B) {
	const path = "personas/default.yaml"
	for _, n := range historySizes {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			b.Run("impl=gitstore", func(b *testing.B) {
				dir := clone(b, packed.snapshot(b, n))
				revs := readRevs(b, dir)
				s, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				i := 0
				for b.Loop() {
					if _, err := s.ReadAt(revs[i%len(revs)], path); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run("impl=git-cli", func(b *testing.B) {
				dir := clone(b, packed.snapshot(b, n))
				revs := readRevs(b, dir)
				i := 0
				for b.Loop() {
					gitCLI(b, dir, "show", revs[i%len(revs)]+":"+path)
					i++
				}
			})
		})
	}
}

// BenchmarkPack times what packing costs at 10,000 commits, on a
// repository holding DefaultPackThreshold loose objects: the Commit that
// packs them (gitstore: into a new pack, merged with the smallest packs
// when the progression needs it, as it would be at that point of the
// history), the largest merge the policy allows (gitstore-merge: the
// loose objects and the smallest packs, up to the bound), and git gc. The
// merged-objects metric is the size of the pack the Commit wrote. Divide
// by the commits between two packs (DefaultPackThreshold over the three or
// four objects a commit writes) for the cost per commit.
func BenchmarkPack(b *testing.B) {
	const n = 10000
	b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
		for _, tc := range []struct {
			name  string
			merge bool
		}{{"impl=gitstore", false}, {"impl=gitstore-merge", true}} {
			b.Run(tc.name, func(b *testing.B) {
				snap := packed.withLoose(b, n)
				if tc.merge {
					defer gitstore.ForceMerge()()
				}
				i, written := 0, 0
				for b.Loop() {
					b.StopTimer()
					dir := clone(b, snap)
					before := packSizes(b, dir)
					s, err := gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
					if err != nil {
						b.Fatal(err)
					}
					edit(b, dir, 1<<30+i) // a revision no commit of the history wrote
					b.StartTimer()
					if _, err := s.Commit("bench pack"); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if u := diskUsage(b, filepath.Join(dir, ".git")); u.loose != 0 {
						b.Fatalf("%d loose objects left: the Commit did not pack", u.loose)
					}
					for name, objects := range packSizes(b, dir) {
						if _, ok := before[name]; !ok {
							written = objects
						}
					}
					s.Close()
					os.RemoveAll(dir)
					i++
					b.StartTimer()
				}
				b.ReportMetric(float64(written), "merged-objects")
			})
		}
		b.Run("impl=git-gc", func(b *testing.B) {
			snap := packed.withLoose(b, n)
			for b.Loop() {
				b.StopTimer()
				dir := clone(b, snap)
				b.StartTimer()
				gitCLI(b, dir, "gc", "-q")
				b.StopTimer()
				os.RemoveAll(dir)
				b.StartTimer()
			}
		})
	})
}

// BenchmarkSize reports the size of .git after 10,000 commits made by
// gitstore, as it leaves it (packing at DefaultPackThreshold), as it
// would without packing, and after git gc: the metrics git-bytes (the sum
// of file sizes), git-disk-bytes (allocated blocks, what du reports) and
// loose-objects, and packs. The time per op is that of measuring; ignore
// it.
func BenchmarkSize(b *testing.B) {
	const n = 10000
	b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
		for _, tc := range []struct {
			name string
			h    *history
			gc   bool
		}{
			{"impl=gitstore", packed, false},
			{"impl=gitstore-nopack", unpacked, false},
			{"impl=git-gc", packed, true},
		} {
			b.Run(tc.name, func(b *testing.B) {
				dir := tc.h.snapshot(b, n)
				if tc.gc {
					dir = clone(b, dir)
					gitCLI(b, dir, "gc", "-q")
				}
				var u usage
				for b.Loop() {
					u = diskUsage(b, filepath.Join(dir, ".git"))
				}
				b.ReportMetric(float64(u.bytes), "git-bytes")
				b.ReportMetric(float64(u.disk), "git-disk-bytes")
				b.ReportMetric(float64(u.loose), "loose-objects")
				b.ReportMetric(float64(len(packSizes(b, dir))), "packs")
			})
		}
	})
}

type usage struct{ bytes, disk, loose int64 }

// diskUsage sums the sizes and the allocated blocks of the files under
// gitDir and counts its loose objects.
func diskUsage(b *testing.B, gitDir string) usage {
	b.Helper()
	var u usage
	err := filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		u.bytes += info.Size()
		u.disk += allocated(info)
		if rel, _ := filepath.Rel(gitDir, p); d.Type().IsRegular() && len(filepath.Base(filepath.Dir(rel))) == 2 &&
			filepath.Dir(filepath.Dir(rel)) == "objects" {
			u.loose++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// allocated returns the bytes of disk a file takes: whole blocks, as du
// counts them.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return info.Size()
}
