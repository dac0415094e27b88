package crashtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBinaryName: the binary is named as go build names it.
func TestBinaryName(t *testing.T) {
	tests := []struct{ importPath, pkg, want string }{
		{"example.com/todo", ".", "todo"},
		{"example.com/todo/cmd/server", "./cmd/server", "server"},
		{"example.com/todo/v2", ".", "todo"},
		{"example.com/todo/v2/cmd/v3", "./cmd/v3", "cmd"}, // any such last element, as go build (load.DefaultExecName)
		{"example.com/v2", ".", "example.com"},
		{"example.com/todo/v1", ".", "v1"},
		{"example.com/todo/v02", ".", "v02"},
		{"todo", ".", "todo"},
		{"v2", ".", "v2"},
		{"command-line-arguments", "cmd/server/main.go", "main"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, binaryName(tt.importPath, tt.pkg), "%s (%s)", tt.importPath, tt.pkg)
	}
}
