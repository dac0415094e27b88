package crashtest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTailKeepsTheEnd(t *testing.T) {
	var tl tail
	for i := range 5000 {
		fmt.Fprintf(&tl, "line %d\n", i)
	}
	got := tl.String()
	assert.LessOrEqual(t, len(got), tailSize)
	assert.True(t, strings.HasSuffix(got, "line 4999"), "ends with the last line")
	assert.True(t, strings.HasPrefix(got, "line "), "starts at a whole line: %.20q", got)
}

func TestLastBytes(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 10, ""},
		{"short\n", 10, "short"},
		{"one\ntwo\nthree\n", 9, "three"},
		{"one\ntwo\nthree", 9, "three"},
		{"abcdefghij", 4, "ghij"}, // no line break: the bytes as they are
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, lastBytes(tt.in, tt.n), "%q", tt.in)
	}
}

func TestExitingSelfIsAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	assert.False(t, exiting(os.Getpid()), "a running process is not exiting")
	assert.True(t, exiting(1<<30), "a PID that does not exist reads as gone")
}
