package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The launch benchmarks need a release and its launchers, as the packaging
// checks do (MCPKEEP_PACKAGING=1, and scripts/packaging.sh run once for
// verdaccio and pipx). With an existing dist/:
//
//	go run ./scripts/release
//	MCPKEEP_PACKAGING=1 MCPKEEP_PACKAGING_DIST=$PWD/dist \
//	  go test -run '^$' -bench 'Launch' -benchtime 20x ./scripts/release
//
// BenchmarkLaunch times a launch to its initialize answer with every cache
// warm: the bare binary, the wheel's script in a venv, npx with the
// package in npm's cache, pipx run with its venv cached, the npm
// launcher run by node directly, and `node -e 0` for Node's own start.
// BenchmarkFirstLaunch does npx and pipx with empty caches each time.
func BenchmarkLaunch(b *testing.B) {
	needPackaging(b)
	rel := buildTwice(b)
	c := repoConfig(b)
	tmp := b.TempDir()

	// The archive's binary.
	dir := filepath.Join(tmp, "archive")
	must(b, os.MkdirAll(dir, 0o755))
	stem := fmt.Sprintf("%s-%s-linux-amd64", c.Name, rel.npmVer)
	runCmd(b, "", nil, "tar", "-xzf", filepath.Join(rel.dist, stem+".tar.gz"), "-C", dir)
	binary := filepath.Join(dir, stem, "helios")

	// The wheel in a venv.
	env := launchEnv(b, tmp, "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
	venv := filepath.Join(tmp, "venv")
	runCmd(b, "", env, python3(b), "-m", "venv", venv)
	runCmd(b, "", env, filepath.Join(venv, "bin", "pip"), "install", "-q", "--no-index", findWheel(b, c, rel, "linux", "amd64"))

	// npx against the local registry, its cache filled by a first launch.
	v := startVerdaccio(b)
	npmCache := filepath.Join(tmp, "npm-cache")
	npmEnv := npmEnv(b, v, tmp, npmCache)
	publishNPM(b, v, c, rel, npmEnv) // the cache is filled below anyway
	empty := filepath.Join(tmp, "empty")
	must(b, os.Mkdir(empty, 0o755))

	pipxEnv := launchEnv(b, tmp, "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1",
		"PIPX_HOME="+filepath.Join(tmp, "pipx"), "PIPX_BIN_DIR="+filepath.Join(tmp, "pipx-bin"))
	pipx, err := exec.LookPath("pipx")
	must(b, err)
	whl := findWheel(b, c, rel, "linux", "amd64")

	cases := []struct {
		name string
		env  []string
		argv []string
	}{
		{"binary", env, []string{binary}},
		{"wheel-script", env, []string{filepath.Join(venv, "bin", c.Name)}},
		{"npx-cached", npmEnv, []string{"npx", "-y", c.Name}},
		{"pipx-cached", pipxEnv, []string{pipx, "run", "--spec", whl, c.Name}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			home := filepath.Join(b.TempDir(), "home")
			argv := append(tc.argv, "--home", home)
			launchOnce(b, empty, tc.env, argv) // install the home, fill caches
			b.ResetTimer()
			var cpu time.Duration
			for range b.N {
				cpu += launchOnce(b, empty, tc.env, argv)
			}
			reportCPU(b, cpu, b.N)
		})
	}
	// The launcher alone: node running the main package's bin as npx
	// installed it, without npm exec and its shell.
	launcher, err := filepath.Glob(filepath.Join(npmCache, "_npx", "*", "node_modules", c.Name, "bin", c.Name+".js"))
	must(b, err)
	if len(launcher) != 1 {
		b.Fatalf("want one npx install of %s in %s, found %v", c.Name, npmCache, launcher)
	}
	b.Run("node-launcher", func(b *testing.B) {
		argv := []string{"node", launcher[0], "--home", filepath.Join(b.TempDir(), "home")}
		launchOnce(b, empty, env, argv)
		b.ResetTimer()
		var cpu time.Duration
		for range b.N {
			cpu += launchOnce(b, empty, env, argv)
		}
		reportCPU(b, cpu, b.N)
	})
	b.Run("node-e-0", func(b *testing.B) {
		var cpu time.Duration
		for range b.N {
			cpu += runCmd(b, empty, env, "node", "-e", "0")
		}
		reportCPU(b, cpu, b.N)
	})
}

// BenchmarkFirstLaunch times npx and pipx to the initialize answer with
// empty caches each time: npm's cache and pipx's home new every launch,
// the packages from the local registry or the wheel file.
func BenchmarkFirstLaunch(b *testing.B) {
	needPackaging(b)
	rel := buildTwice(b)
	c := repoConfig(b)
	tmp := b.TempDir()
	v := startVerdaccio(b)
	publishNPM(b, v, c, rel, npmEnv(b, v, tmp, filepath.Join(tmp, "publish-cache")))
	empty := filepath.Join(tmp, "empty")
	must(b, os.Mkdir(empty, 0o755))
	pipx, err := exec.LookPath("pipx")
	must(b, err)
	whl := findWheel(b, c, rel, "linux", "amd64")
	b.Run("npx", func(b *testing.B) {
		var cpu time.Duration
		for i := range b.N {
			b.StopTimer()
			env := npmEnv(b, v, tmp, filepath.Join(b.TempDir(), fmt.Sprint("cache", i)))
			b.StartTimer()
			cpu += launchOnce(b, empty, env, []string{"npx", "-y", c.Name, "--home", filepath.Join(b.TempDir(), "home")})
		}
		reportCPU(b, cpu, b.N)
	})
	b.Run("pipx", func(b *testing.B) {
		var cpu time.Duration
		for range b.N {
			b.StopTimer()
			d := b.TempDir()
			env := launchEnv(b, tmp, "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1",
				"PIPX_HOME="+filepath.Join(d, "pipx"), "PIPX_BIN_DIR="+filepath.Join(d, "bin"))
			b.StartTimer()
			cpu += launchOnce(b, empty, env, []string{pipx, "run", "--spec", whl, c.Name, "--home", filepath.Join(d, "home")})
		}
		reportCPU(b, cpu, b.N)
	})
}

// launchOnce starts argv, times it to the initialize answer, then stops
// it by closing stdin (untimed). It returns the CPU time of the launch's
// processes from start to exit, a figure a busy machine disturbs less
// than the wall time: each parent waits for its child, so the launcher's
// rusage holds the whole tree's.
func launchOnce(b *testing.B, dir string, env, argv []string) time.Duration {
	b.Helper()
	p := startMCP(b, dir, env, argv...)
	p.initialize(b)
	b.StopTimer()
	p.stdin.Close()
	if code := p.waitExit(b); code != 0 {
		b.Fatalf("%v exited %d: %s", argv, code, p.stderr)
	}
	b.StartTimer()
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// reportCPU reports the mean CPU time of n launches as cpu-ms/op.
func reportCPU(b *testing.B, total time.Duration, n int) {
	b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "cpu-ms/op")
}

// runCmd runs a command to completion, failing the benchmark on an error.
// It returns the command's CPU time.
func runCmd(b *testing.B, dir string, env []string, argv ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %v\n%s", argv, err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// must fails the benchmark on an error.
func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
