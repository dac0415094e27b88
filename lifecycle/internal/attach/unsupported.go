//go:build !unix

package attach

// mcpkeep supports Linux and macOS (unix) only: attaching needs unix
// sockets and peer credentials. The build stops here rather than misbehave.
var _ = mcpkeep_supports_unix_only_windows_is_not_supported
