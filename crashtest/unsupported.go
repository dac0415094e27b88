//go:build !unix

package crashtest

// mcpkeep supports Linux and macOS (unix) only: crashtest kills with
// SIGKILL and reads wait statuses. The build stops here rather than misbehave.
var _ = mcpkeep_supports_unix_only_windows_is_not_supported
