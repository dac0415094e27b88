//go:build !unix

package etcdtest

// mcpkeep supports Linux and macOS (unix) only; stopping etcd needs
// process groups and signals. The build stops here rather than misbehave.
var _ = mcpkeep_supports_unix_only_windows_is_not_supported
