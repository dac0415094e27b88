package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// BuildError reports a go build that failed, or a pkg that Build cannot
// build into a binary: not a main package, or more than one package.
// Output holds what the go command printed: the compiler's errors.
type BuildError struct {
	Package string // the package as passed to Build
	Output  string // combined output of go list or go build
	Err     error  // the go command's exit error, or what is wrong with the package
}

// Error names the package and quotes go build's output.
func (e *BuildError) Error() string {
	out := strings.TrimSpace(e.Output)
	if out == "" {
		return fmt.Sprintf("crashtest: go build %s: %v", e.Package, e.Err)
	}
	return fmt.Sprintf("crashtest: go build %s: %v\n%s", e.Package, e.Err, out)
}

// Unwrap returns the go command's error.
func (e *BuildError) Unwrap() error { return e.Err }

var builds struct {
	mu    sync.Mutex
	paths map[[3]string]string // by working directory, package, output directory
}

// Build compiles the main package pkg into the directory dir with the go
// command found in PATH and returns the binary's path. pkg is anything go
// build accepts: an import path or a directory relative to the current one
// (in a test, the package's own directory), such as "./cmd/server". The
// binary is named as go build names it: after the last element of the
// package's import path (so "." in the module example.com/todo gives
// dir/todo), without a major version suffix such as /v2. A pkg that is not
// one main package is a *BuildError.
//
// A binary built by an earlier call with the same pkg and dir is reused
// while it exists, so tests may call Build freely. Build does not pass the
// race detector or coverage flags on; set GOFLAGS for those. To test a
// binary built some other way, skip Build and give its path to Start.
func Build(ctx context.Context, pkg, dir string) (string, error) {
	if pkg == "" || dir == "" {
		return "", errors.New("crashtest: Build needs a package and a directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	key := [3]string{wd, pkg, abs}
	builds.mu.Lock()
	defer builds.mu.Unlock() // one go build at a time: it parallelizes itself
	if p, ok := builds.paths[key]; ok {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("crashtest: no go command in PATH to build %s; build the binary yourself and pass its path to Start: %w", pkg, err)
	}
	importPath, err := mainPackage(ctx, goTool, pkg)
	if err != nil {
		return "", err
	}
	out := filepath.Join(abs, binaryName(importPath, pkg))
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, pkg)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &BuildError{Package: pkg, Output: buf.String(), Err: err}
	}
	if builds.paths == nil {
		builds.paths = make(map[[3]string]string)
	}
	builds.paths[key] = out
	return out, nil
}

// mainPackage asks the go command what pkg is, and returns its import
// path ("command-line-arguments" for a list of .go files). It refuses a
// package that is not main, which go build -o would write as an archive,
// and a pattern that matches more than one package.
func mainPackage(ctx context.Context, goTool, pkg string) (string, error) {
	cmd := exec.CommandContext(ctx, goTool, "list", "-f", "{{.Name}} {{.ImportPath}}", pkg)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &BuildError{Package: pkg, Output: stderr.String(), Err: err}
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1 {
		return "", &BuildError{Package: pkg, Output: stdout.String(),
			Err: fmt.Errorf("it matches %d packages: Build compiles one main package", len(lines))}
	}
	name, importPath, _ := strings.Cut(lines[0], " ")
	if name != "main" {
		it := importPath
		if it == pkg {
			it = "it"
		}
		return "", &BuildError{Package: pkg,
			Err: fmt.Errorf("%s is package %s, not a main package: Build compiles a package main with a func main", it, name)}
	}
	return importPath, nil
}

// binaryName returns the name go build gives the binary of the package
// at importPath: its last element, or the one before a major version
// suffix; for .go files named on the command line, the first one's.
func binaryName(importPath, pkg string) string {
	if importPath == "command-line-arguments" {
		return strings.TrimSuffix(path.Base(filepath.ToSlash(pkg)), ".go")
	}
	elem := path.Base(importPath)
	if dir := path.Dir(importPath); dir != "." && isMajorVersion(elem) {
		elem = path.Base(dir)
	}
	return elem
}

// isMajorVersion reports whether elem is a module path's major version
// suffix: v2, v3, and so on.
func isMajorVersion(elem string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(elem, "v"))
	return err == nil && n >= 2 && elem == "v"+strconv.Itoa(n)
}
