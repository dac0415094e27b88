package heliosmain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mcpkeep/mcpkeep/bootstrap"
	"github.com/mcpkeep/mcpkeep/cmd/internal/helios"
)

// Sibling is the name of the binary that serves helios with the etcd
// client, beside helios in every package of a release: the release
// archives' directory, the wheel's scripts, the npm platform package's
// bin/.
const Sibling = "mcpkeep"

// EnvVersion is the environment variable through which a helios that runs
// its sibling for etcd passes its version (bootstrap.ToolkitVersion), so
// that the sibling refuses to serve for a helios of another build
// (CheckVersion). Nothing else sets it.
const EnvVersion = "MCPKEEP_HELIOS_VERSION"

// SiblingError is a helios asked for etcd that cannot run the mcpkeep
// beside it: there is none at Path, or it cannot be run.
type SiblingError struct {
	Path string // where helios looked for mcpkeep
	Err  error  // why it cannot run it: not there, not executable, exec failed
}

// Error says where helios looked and how to install the mcpkeep it needs.
func (e *SiblingError) Error() string {
	return fmt.Sprintf("etcd election runs in %s, which is not usable at %s (%v): this helios links no etcd client. "+
		"Install mcpkeep of the same version in that directory (%s), or install helios from a package that ships both "+
		"(a release archive, pip or npm)", Sibling, e.Path, e.Err, installHint(helios.Version()))
}

// Unwrap returns Err: errors.Is(err, fs.ErrNotExist) holds for a missing
// mcpkeep.
func (e *SiblingError) Unwrap() error { return e.Err }

// installHint says how to put the mcpkeep of version v (a
// bootstrap.ToolkitVersion, or a module version) beside a helios.
func installHint(v string) string {
	if v, _, _ = strings.Cut(v, " "); strings.HasPrefix(v, "v") {
		return "go install github.com/mcpkeep/mcpkeep/cmd/mcpkeep@" + v
	}
	return "go build -o DIR ./cmd/mcpkeep from the same source as this helios"
}

// siblingPath returns where this executable's mcpkeep is: in the same
// directory as the executable, after symlinks (pipx and npm link their
// bin entries to the installed file, beside which mcpkeep is).
func siblingPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable, beside which %s runs the etcd election: %w", Sibling, err)
	}
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	return filepath.Join(filepath.Dir(self), Sibling), nil
}

// execWithEtcd replaces this process with `mcpkeep helios args...`, the
// sibling that links the etcd client; it returns only on failure. exec
// keeps the PID, the open stdin, stdout and stderr, and the environment,
// so an MCP client on stdio and a supervisor watching the PID see one
// process throughout.
func execWithEtcd(args []string) error {
	path, err := siblingPath()
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return &SiblingError{Path: path, Err: err}
	case info.IsDir() || info.Mode()&0o111 == 0:
		return &SiblingError{Path: path, Err: errors.New("not an executable file")}
	}
	env := []string{EnvVersion + "=" + bootstrap.ToolkitVersion()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvVersion+"=") {
			env = append(env, kv)
		}
	}
	argv := append([]string{path, "helios"}, args...)
	if err := syscall.Exec(path, argv, env); err != nil {
		return &SiblingError{Path: path, Err: &fs.PathError{Op: "exec", Path: path, Err: err}}
	}
	return nil // not reached: Exec returns only on failure
}

// VersionError is an mcpkeep that a helios of another version ran to serve
// with etcd.
type VersionError struct {
	Helios, Mcpkeep string // the two versions
	Path            string // the mcpkeep's executable
}

// Error names both versions and how to install the matching mcpkeep.
func (e *VersionError) Error() string {
	return fmt.Sprintf("helios %s ran %s %s at %s for its etcd election: the two must be one build. "+
		"Install mcpkeep of helios's version there (%s), or both from one package",
		e.Helios, Sibling, e.Mcpkeep, e.Path, installHint(e.Helios))
}

// CheckVersion returns a *VersionError when this process was started by a
// helios (EnvVersion set) of another version than its own, and removes
// EnvVersion from the environment, so that nothing it starts sees it.
// Main calls it first when it is given an elector.
func CheckVersion() error {
	want, ok := os.LookupEnv(EnvVersion)
	if !ok {
		return nil
	}
	os.Unsetenv(EnvVersion)
	if have := bootstrap.ToolkitVersion(); want != have {
		self, _ := os.Executable()
		return &VersionError{Helios: want, Mcpkeep: have, Path: self}
	}
	return nil
}
