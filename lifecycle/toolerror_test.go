package lifecycle_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/lifecycle"
)

// TestToolError: what a client gets for an error names the file relative
// to the config directory and the line, says what is wrong in words that
// quote nothing of the file but the start of the line (and nothing at all
// of a file outside the config directory), keeps the remedy, and matches
// the cause in-process; the full error goes to the log.
func TestToolError(t *testing.T) {
	home := t.TempDir()
	configDir := filepath.Join(home, "config")
	require.NoError(t, os.MkdirAll(filepath.Join(configDir, "personas"), 0o700))
	var logs bytes.Buffer
	env := &lifecycle.Env{Home: home, ConfigDir: configDir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	secretLine := "rootpw_20228_99999_7 and more of the secret line"
	put := func(rel, data string) string {
		p := filepath.Join(home, filepath.FromSlash(rel))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
		return p
	}
	var p struct {
		Name string `yaml:"name"`
	}
	inside := atomicfile.ReadYAMLStrict(put("config/personas/evil.yaml", "name: evil\n"+secretLine+": x\n"), &p)
	outside := atomicfile.ReadYAMLStrict(put("notes.yaml", "name: n\n"+secretLine+": x\n"), &p)
	require.NoError(t, os.Symlink("/etc/shadow", filepath.Join(configDir, "personas", "link.yaml")))
	_, refused := env.Reader().ReadFile(filepath.Join(configDir, "personas", "link.yaml"))

	for _, tc := range []struct {
		name    string
		err     error
		is      error
		says    []string
		notSays []string
	}{
		{"corrupt inside", inside, atomicfile.ErrCorrupt,
			[]string{`personas/evil.yaml:2: unknown field (line 2 begins "rootpw_20228_99999_7 and more of the sec")`, "doctor --fix --home " + home},
			[]string{"the secret line", configDir + "/", "helios"}},
		{"wrapped", fmt.Errorf("active_persona: %w", inside), atomicfile.ErrCorrupt,
			[]string{"active_persona: ", `personas/evil.yaml:2: unknown field (line 2 begins "rootpw_`},
			[]string{"the secret line", "not found in type"}},
		{"corrupt outside", outside, atomicfile.ErrCorrupt,
			[]string{filepath.Join(home, "notes.yaml") + ":2: unknown field (fix the file by hand or restore it from a backup)"},
			[]string{"rootpw", "begins"}},
		{"refused", refused, atomicfile.ErrNotRegular,
			[]string{"personas/link.yaml is a symbolic link, not a regular file", "the server's next start", "never through a link"},
			[]string{"/etc/shadow", configDir + "/"}},
		{"disk", &os.PathError{Op: "write", Path: filepath.Join(configDir, "base.yaml"), Err: syscall.ENOSPC}, syscall.ENOSPC,
			[]string{"write base.yaml: no space left on device", "is full"}, nil},
		{"tx path", &lifecycle.PathError{Op: "WriteFile", Path: "../x.yaml",
			Reason: "the path leaves ConfigDir (" + configDir + "); give one inside it, relative to ConfigDir (" + configDir + ")"}, lifecycle.ErrBadPath,
			[]string{`tx.WriteFile("../x.yaml"): the path leaves ConfigDir; give one inside it, relative to ConfigDir`}, []string{configDir}},
		{"plain", errors.New("no persona \"x\" (have: default)"), nil, []string{"no persona \"x\" (have: default)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			err := env.ToolError(tc.err)
			require.Error(t, err)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is, "the cause is still matchable")
			}
			for _, s := range tc.says {
				assert.Contains(t, err.Error(), s)
			}
			for _, s := range tc.notSays {
				assert.NotContains(t, err.Error(), s)
			}
			if err.Error() != env.Explain(tc.err).Error() {
				assert.Contains(t, logs.String(), strings.ReplaceAll(tc.err.Error(), "\n", "\\n")[:20], "the full error is logged")
			}
		})
	}
	assert.NoError(t, env.ToolError(nil))
}
