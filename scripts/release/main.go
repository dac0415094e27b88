// Command release builds a release of helios and mcpkeep into dist/, for
// launching without a Go toolchain:
//
//   - a .tar.gz per platform with both binaries, LICENSE and README.md;
//   - the npm packages, ready for `npm publish dist/npm/<name>`: a main
//     package with a Node launcher and one package per platform;
//   - a wheel per platform, with the binaries as the wheel's scripts;
//   - SHA256SUMS of the archives and wheels.
//
// Usage, from anywhere in the repository:
//
//	go run ./scripts/release [-version vX.Y.Z] [-out dist] [-dirty]
//
// The binaries are built for linux/amd64, linux/arm64, darwin/amd64 and
// darwin/arm64 (packaging/release.json lists them, with every name the
// packages use) with CGO_ENABLED=0 and -trimpath, the version and commit
// stamped in with -ldflags -X. The version is -version, else the tag
// vX.Y.Z at HEAD, else v0.0.0-dev.N with N the number of commits. Every
// file time is the commit's time (or SOURCE_DATE_EPOCH), and archives have
// sorted entries, no owners and gzip headers without a time: two builds of
// one commit with one Go toolchain are byte-identical.
//
// It refuses a work tree with uncommitted changes, whose binaries would not
// be the commit's; -dirty builds anyway and stamps the commit <sha>+dirty.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ver := fs.String("version", "", "the release's version, vX.Y.Z[-rc.N]; default: the vX.Y.Z tag at HEAD, else v0.0.0-dev.<commits>")
	out := fs.String("out", "dist", "output directory, replaced as a whole (relative to the repository's root)")
	dirty := fs.Bool("dirty", false, "build from a work tree with uncommitted changes (the commit is stamped <sha>+dirty)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./scripts/release [-version vX.Y.Z] [-out dist] [-dirty]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "release: unexpected argument %q (see -help)\n", fs.Arg(0))
		return exitUsage
	}
	r, err := newRelease(ctx, *ver, *out, *dirty)
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return exitError
	}
	fmt.Fprintf(stdout, "release %s of %s (commit %s, %s) into %s\n", r.version.Go(), r.cfg.Name, r.commit, r.mtime.Format(time.RFC3339), r.out)
	if err := r.build(ctx, stdout); err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return exitError
	}
	return exitOK
}

// release is one build of the release.
type release struct {
	root    string  // the repository's root
	cfg     *config // packaging/release.json
	version version
	commit  string    // stamped: the full commit, +dirty for a dirty tree
	mtime   time.Time // every file's time in every archive
	out     string    // absolute output directory
}

// newRelease reads the configuration and what git says of HEAD.
func newRelease(ctx context.Context, ver, out string, allowDirty bool) (*release, error) {
	root, err := git(ctx, "", "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("run it inside the mcpkeep repository: %w", err)
	}
	r := &release{root: root}
	if r.cfg, err = loadConfig(filepath.Join(root, ConfigFile)); err != nil {
		return nil, err
	}
	if r.commit, err = git(ctx, root, "rev-parse", "HEAD"); err != nil {
		return nil, err
	}
	status, err := git(ctx, root, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return nil, err
	}
	if status != "" {
		if !allowDirty {
			return nil, fmt.Errorf("the work tree has uncommitted changes, so the binaries would not be commit %s's: "+
				"commit or stash them (git status), or pass -dirty to build anyway", r.commit[:12])
		}
		r.commit += "+dirty"
	}
	if r.mtime, err = sourceDate(ctx, root); err != nil {
		return nil, err
	}
	if ver == "" {
		if ver, err = defaultVersion(ctx, root); err != nil {
			return nil, err
		}
	}
	if r.version, err = parseVersion(ver); err != nil {
		return nil, fmt.Errorf("-version: %w", err)
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	r.out = out
	return r, nil
}

// sourceDate is SOURCE_DATE_EPOCH, else HEAD's commit time.
func sourceDate(ctx context.Context, root string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		var err error
		if s, err = git(ctx, root, "log", "-1", "--format=%ct", "HEAD"); err != nil {
			return time.Time{}, err
		}
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 315532800 { // zip cannot say a time before 1980
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a Unix time after 1980", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// defaultVersion is the vX.Y.Z tag at HEAD, else v0.0.0-dev.N with N the
// number of commits up to HEAD, which grows with every commit.
func defaultVersion(ctx context.Context, root string) (string, error) {
	tags, err := git(ctx, root, "tag", "--points-at", "HEAD", "--list", "v*")
	if err != nil {
		return "", err
	}
	for t := range strings.FieldsSeq(tags) {
		if _, err := parseVersion(t); err == nil {
			return t, nil
		}
	}
	n, err := git(ctx, root, "rev-list", "--count", "HEAD")
	if err != nil {
		return "", err
	}
	return "v0.0.0-dev." + n, nil
}

// git runs git in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// stampPackage is the package whose variables -ldflags -X sets.
const stampPackage = "github.com/mcpkeep/mcpkeep/internal/buildinfo"

// build builds everything into a new directory beside r.out and then puts
// it in r.out's place.
func (r *release) build(ctx context.Context, log io.Writer) error {
	work, err := os.MkdirTemp("", "mcpkeep-release-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bins := map[string]map[string][]byte{}
	for _, p := range r.cfg.Platforms {
		fmt.Fprintf(log, "build %s\n", p)
		if bins[p.String()], err = r.compile(ctx, p, filepath.Join(work, p.GOOS+"_"+p.GOARCH)); err != nil {
			return err
		}
	}
	license, err := os.ReadFile(filepath.Join(r.root, "LICENSE"))
	if err != nil {
		return err
	}
	repoReadme, err := os.ReadFile(filepath.Join(r.root, "README.md"))
	if err != nil {
		return err
	}
	readme, err := r.packageReadme()
	if err != nil {
		return err
	}
	launcher, err := os.ReadFile(filepath.Join(r.root, "packaging", "npm", "launcher.js"))
	if err != nil {
		return err
	}

	tmp := filepath.Join(work, "dist")
	var sums []string
	put := func(rel string, data []byte, exec bool) error {
		path := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if exec {
			mode = 0o755
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
		return os.Chmod(path, mode) // whatever the umask
	}
	for _, p := range r.cfg.Platforms {
		stem := fmt.Sprintf("%s-%s-%s-%s", r.cfg.Name, r.version.NPM(), p.GOOS, p.GOARCH)
		files := []file{{Name: "LICENSE", Data: license}, {Name: "README.md", Data: repoReadme}}
		for _, b := range slices.Sorted(maps.Keys(r.cfg.Binaries)) {
			files = append(files, file{Name: b, Data: bins[p.String()][b], Exec: true})
		}
		tgz, err := tarGz(stem, files, r.mtime)
		if err != nil {
			return err
		}
		if err := put(stem+".tar.gz", tgz, false); err != nil {
			return err
		}
		name, whl, err := wheel(r.cfg, r.version, p, bins[p.String()], license, readme, r.mtime)
		if err != nil {
			return err
		}
		if err := put(name, whl, false); err != nil {
			return err
		}
		sums = append(sums, stem+".tar.gz", name)
	}
	pkgs, err := npmPackages(r.cfg, r.version, bins, launcher, license, readme)
	if err != nil {
		return err
	}
	for dir, files := range pkgs {
		for _, f := range files {
			if err := put("npm/"+dir+"/"+f.Name, f.Data, f.Exec); err != nil {
				return err
			}
		}
	}
	if err := writeChecksums(tmp, sums); err != nil {
		return err
	}
	if err := r.replaceOut(tmp); err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %d archives, %d wheels, %d npm packages and %s to %s\n",
		len(r.cfg.Platforms), len(r.cfg.Platforms), len(pkgs), ChecksumsFile, r.out)
	return nil
}

// compile builds every binary for p into dir and returns their bytes.
func (r *release) compile(ctx context.Context, p platform, dir string) (map[string][]byte, error) {
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s", stampPackage, r.version.Go(), stampPackage, r.commit)
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", dir + string(filepath.Separator)}
	for _, b := range slices.Sorted(maps.Keys(r.cfg.Binaries)) {
		args = append(args, r.cfg.Binaries[b])
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = r.root
	// Everything that shapes the bytes is set here, not taken from the
	// environment: a GOFLAGS or GOAMD64 of the caller's does not leak in.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.GOOS, "GOARCH="+p.GOARCH,
		"GOFLAGS=-mod=readonly", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build for %s: %w\n%s", p, err, stderr.String())
	}
	bins := map[string][]byte{}
	for b, pkg := range r.cfg.Binaries {
		data, err := os.ReadFile(filepath.Join(dir, filepath.Base(pkg)))
		if err != nil {
			return nil, fmt.Errorf("binary %s of %s: %w", b, p, err)
		}
		bins[b] = data
	}
	return bins, nil
}

// packageReadme is packaging/README.md filled in: the long description of
// the npm packages and the wheels.
func (r *release) packageReadme() ([]byte, error) {
	path := filepath.Join(r.root, "packaging", "README.md")
	t, err := template.ParseFiles(path)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]string{"Name": r.cfg.Name, "Homepage": r.cfg.Homepage,
		"Version": r.version.Go(), "NPMVersion": r.version.NPM(), "PythonVersion": r.version.Python()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b.Bytes(), nil
}

// replaceOut moves the finished tree tmp to r.out. An existing r.out is
// removed first only if it holds a release (a SHA256SUMS) or nothing, so a
// mistyped -out does not delete someone's directory.
func (r *release) replaceOut(tmp string) error {
	entries, err := os.ReadDir(r.out)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if len(entries) > 0 {
			if _, err := os.Stat(filepath.Join(r.out, ChecksumsFile)); err != nil {
				return fmt.Errorf("%s is not empty and holds no %s, so it is not a release this command made: remove it or pick another -out", r.out, ChecksumsFile)
			}
		}
		if err := os.RemoveAll(r.out); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(r.out), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, r.out); err != nil {
		// Another file system: copy.
		return copyTree(tmp, r.out)
	}
	return nil
}

// copyTree copies the files of src into dst, keeping their modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
}
