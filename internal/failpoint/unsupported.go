//go:build !unix

package failpoint

// mcpkeep supports Linux and macOS (unix) only; the kill action needs
// SIGKILL. The build stops here rather than misbehave.
var _ = mcpkeep_supports_unix_only_windows_is_not_supported
