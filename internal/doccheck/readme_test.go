package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeHarnessSnippetIsTheExample keeps README's "build your own
// server" snippet the code of lifecycle's ExampleHarness, which the tests
// compile: its lines, indentation aside, must appear in order and together
// in that function.
func TestReadmeHarnessSnippetIsTheExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	snippet, err := goBlockAfter(string(readme), "## Build your own server on the harness")
	require.NoError(t, err)
	example, err := os.ReadFile(filepath.Join("..", "..", "lifecycle", "example_test.go"))
	require.NoError(t, err)
	body, err := funcBody(string(example), "func ExampleHarness()")
	require.NoError(t, err)
	assert.True(t, containsRun(trimmed(body), trimmed(snippet)),
		"README's snippet is not in ExampleHarness; make them the same code:\n%s", snippet)
}

func TestContainsRun(t *testing.T) {
	assert.True(t, containsRun([]string{"a", "b", "c"}, []string{"b", "c"}))
	assert.False(t, containsRun([]string{"a", "b", "c"}, []string{"a", "c"}), "in order and together")
	assert.False(t, containsRun([]string{"a"}, nil), "an empty snippet is no snippet")
}

// goBlockAfter returns the first ```go block after the line heading.
func goBlockAfter(text, heading string) (string, error) {
	_, rest, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("README.md has no heading %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "```go\n")
	if !ok {
		return "", fmt.Errorf("README.md has no ```go block after %q", heading)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return "", fmt.Errorf("README.md: the ```go block after %q is not closed", heading)
	}
	return block, nil
}

// funcBody returns the lines of the function that starts with sig, up to
// its closing brace at the start of a line.
func funcBody(src, sig string) (string, error) {
	_, rest, ok := strings.Cut(src, "\n"+sig)
	if !ok {
		return "", fmt.Errorf("no %s", sig)
	}
	body, _, ok := strings.Cut(rest, "\n}\n")
	if !ok {
		return "", fmt.Errorf("%s has no closing brace", sig)
	}
	return body, nil
}

// trimmed returns the non-empty lines of s without their indentation.
func trimmed(s string) []string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// containsRun reports whether run appears in lines, in order and together.
func containsRun(lines, run []string) bool {
	if len(run) == 0 {
		return false
	}
	for i := 0; i+len(run) <= len(lines); i++ {
		if strings.Join(lines[i:i+len(run)], "\n") == strings.Join(run, "\n") {
			return true
		}
	}
	return false
}
