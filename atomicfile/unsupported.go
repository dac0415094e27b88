//go:build !unix

package atomicfile

// mcpkeep supports Linux and macOS (unix) only: Windows rename semantics
// and the lack of directory fsync would break the package's guarantees.
var _ = mcpkeep_supports_unix_only_windows_is_not_supported
