package layering

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/mcpkeep/mcpkeep/"

// allowed lists, for each package, the module packages it may import
// directly (non-test imports). A package missing here fails the test, so a
// new package must be placed in the table on purpose.
var allowed = map[string][]string{
	"internal/failpoint": {},
	"internal/barrier":   {},
	"internal/proc":      {},
	"internal/layering":  {},
	"internal/doccheck":  {},
	"internal/buildinfo": {},
	"atomicfile":         {"internal/failpoint", "internal/barrier"},
	"statefile":          {"atomicfile", "internal/proc", "internal/failpoint"},
	"portmgr":            {"internal/failpoint"},
	"gitstore":           {"atomicfile", "internal/failpoint", "internal/barrier"},
	"bootstrap":          {"atomicfile", "gitstore", "internal/buildinfo", "internal/failpoint"},
	"recovery":           {"atomicfile", "gitstore", "statefile", "internal/proc", "internal/failpoint"},
	// the answer to a request that reuses an id in progress, for the
	// connections of mcpserve and attach.
	"lifecycle/internal/inflight": {},
	// JSON-RPC error responses with "id": null, for mcpserve and stdioconn.
	"lifecycle/internal/rpcerr": {},
	// a stdio client's transport, which answers a bad line and reads on,
	// for mcpserve and the attach forwarder's client.
	"lifecycle/internal/stdioconn": {"lifecycle/internal/rpcerr"},
	// the stdio and Streamable HTTP transport, private to lifecycle.
	"lifecycle/internal/mcpserve": {"lifecycle/internal/inflight", "lifecycle/internal/rpcerr", "lifecycle/internal/stdioconn"},
	// the socket, forwarder and listener of attached clients, private to lifecycle.
	"lifecycle/internal/attach": {"internal/failpoint", "lifecycle/internal/inflight"},
	"lifecycle": {"atomicfile", "statefile", "portmgr", "gitstore", "bootstrap", "recovery",
		"lifecycle/internal/mcpserve", "lifecycle/internal/attach", "lifecycle/internal/stdioconn", "internal/proc", "internal/failpoint"},
	// the etcd Elector, above lifecycle: servers that do not use etcd
	// do not link its client.
	"lifecycle/etcdlock": {"lifecycle", "lifecycle/etcdlock/etcdconfig"},
	// etcdlock's settings without the etcd client: a server reads them
	// to decide whether it needs etcdlock at all.
	"lifecycle/etcdlock/etcdconfig": {"atomicfile", "bootstrap"},
	"crashtest":                     {"internal/failpoint"},
	// helios's tools, shared by cmd/helios, cmd/mcpkeep (its helios command) and the bare benchmark servers.
	"cmd/internal/helios": {"atomicfile", "bootstrap", "internal/buildinfo", "lifecycle", "statefile"},
	// helios's command line, run by cmd/helios and by `mcpkeep helios`,
	// which alone links etcd: here it reads etcd's settings, not etcdlock.
	"cmd/internal/heliosmain": {"bootstrap", "cmd/internal/helios", "lifecycle", "lifecycle/etcdlock/etcdconfig", "statefile"},
	// the example server the README points newcomers to: what it may
	// import is what a server of theirs needs.
	"examples/notes": {"atomicfile", "bootstrap", "gitstore", "lifecycle"},
	// helpers for tests that drive MCP servers.
	"internal/mcptest": {"internal/proc"},
	// the raw durable replace the change path's benchmarks compare with.
	"internal/diskfloor": {},
	// a real etcd server that tests start and stop.
	"internal/testserver/etcdtest": {},
	// the release build (go run ./scripts/release), a command of its own.
	"scripts/release": {},
}

// thirdParty lists which module packages may import a given third-party
// module; others may not.
var thirdParty = map[string][]string{
	"github.com/go-git/":                      {"gitstore"},
	"github.com/google/renameio":              {"atomicfile"},
	"gopkg.in/yaml.v3":                        {"atomicfile", "bootstrap", "recovery", "lifecycle"},
	"github.com/nightlyone/lockfile":          {"lifecycle"},
	"github.com/gofrs/flock":                  {"statefile", "lifecycle"},
	"go.etcd.io/etcd/":                        {"lifecycle/etcdlock"},
	"go.uber.org/zap":                         {"lifecycle/etcdlock"},
	"github.com/modelcontextprotocol/go-sdk/": {"lifecycle/internal/inflight", "lifecycle/internal/rpcerr", "lifecycle/internal/stdioconn", "lifecycle/internal/mcpserve", "lifecycle/internal/attach", "lifecycle", "cmd/internal/helios", "internal/mcptest", "examples/notes"},
}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	require.NoError(t, err)
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		may, known := allowed[pkg]
		if !known && (strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "internal/testserver/") || strings.HasPrefix(pkg, "internal/testclient/") ||
			strings.Contains(pkg, "/internal/") || pkg == "internal/crashsuite") {
			continue // binaries, test servers and clients, test suites and unlisted private helpers may import anything
		}
		if !assert.True(t, known, "package %s is not in the layering table; add it where DESIGN.md puts it", pkg) {
			continue
		}
		for _, imp := range fields[1:] {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				assert.True(t, slices.Contains(may, dep), "%s imports %s, which is not below it in DESIGN.md", pkg, dep)
				continue
			}
			for prefix, users := range thirdParty {
				if strings.HasPrefix(imp, prefix) {
					assert.True(t, slices.Contains(users, pkg), "%s imports %s; only %v may", pkg, imp, users)
				}
			}
		}
	}
}

// TestWindowsBuildSaysWhy: DESIGN.md has the module fail to build on
// Windows with a clear message rather than misbehave. Every error the
// build prints must be that message: a stray "undefined: syscall.Kill"
// would bury it.
func TestWindowsBuildSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the module for Windows")
	}
	cmd := exec.Command("go", "build", module+"...")
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the module must not build on Windows")
	var errs []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "go: downloading ") { // "# package" headers
			errs = append(errs, line)
		}
	}
	require.NotEmpty(t, errs)
	for _, line := range errs {
		assert.Contains(t, line, "mcpkeep_supports_unix_only_windows_is_not_supported", "every Windows build error is the clear one")
	}
}

// TestNoEtcdUnlessAsked: the etcd client's, gRPC's and protobuf's packages
// cost a server milliseconds of init at every start and double its binary
// (issue 13's cold start), so only what runs an etcd election links them:
// lifecycle/etcdlock and the mcpkeep binary, which helios runs when etcd
// is asked for. helios, the library and the example server do not.
func TestNoEtcdUnlessAsked(t *testing.T) {
	for _, pkg := range []string{"cmd/helios", "lifecycle", "lifecycle/etcdlock/etcdconfig", "examples/notes"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		require.NoError(t, err, "go list -deps %s", pkg)
		for dep := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			for _, heavy := range []string{"go.etcd.io/", "google.golang.org/grpc", "google.golang.org/protobuf", "go.uber.org/zap", module + "lifecycle/etcdlock"} {
				if strings.HasPrefix(dep, heavy) && dep != module+"lifecycle/etcdlock/etcdconfig" {
					assert.Fail(t, pkg+" links "+dep, "%s must not link %s: run the etcd election in a binary of its own (helios runs mcpkeep helios)", pkg, heavy)
				}
			}
		}
	}
}
