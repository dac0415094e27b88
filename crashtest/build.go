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
	"strings"
	"sync"
)

// BuildError reports a go build that failed. Output holds what the go
// command printed: the compiler's errors.
type BuildError struct {
	Package string // the package as passed to Build
	Output  string // combined output of go build
	Err     error  // the go command's exit error
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
// binary is named after the package's last path element.
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
	name := path.Base(filepath.ToSlash(strings.TrimSuffix(pkg, "/...")))
	if name == "." || name == "/" || name == ".." {
		name = "prog"
	}
	out := filepath.Join(abs, name)
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("crashtest: no go command in PATH to build %s; build the binary yourself and pass its path to Start: %w", pkg, err)
	}
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
