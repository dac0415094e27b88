//go:build !unix

package proc

// mcpkeep supports Linux and macOS (unix) only. Windows has no flock, no
// SIGKILL and different rename semantics; rather than misbehave quietly, the
// build stops here.
var _ = mcpkeep_supports_unix_only_windows_is_not_supported
