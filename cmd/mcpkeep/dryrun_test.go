package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/internal/failpoint"
	"github.com/mcpkeep/mcpkeep/internal/mcptest"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// TestDoctorDryRunPredictsFix: after a writer was killed in the middle of
// a change, doctor's dry run says what --fix then does: each finding of
// --fix is one of the dry run's, in the future tense ("would roll
// forward", never "would repair: rolled forward"), or the rebuilt index
// the dry run's note says --fix may make; and each of the dry run's is
// one of --fix's, or the uncommitted changes the dry run says the
// roll-forward may cover.
func TestDoctorDryRunPredictsFix(t *testing.T) {
	for _, point := range []string{"gitstore.after-intent", "gitstore.before-barrier-2", "gitstore.flush-after-ref"} {
		t.Run(point, func(t *testing.T) {
			home := installed(t)
			cmd := exec.CommandContext(t.Context(), heliosBin, "--home", home, "--registry", "")
			cmd.Env = append(os.Environ(), failpoint.EnvVar+"="+point+"=kill")
			cmd.Stdin = strings.NewReader(mcptest.Handshake + mcptest.ToolCall(t, 1, "update_preference", map[string]string{"key": "tone", "value": "dry"}))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			require.Error(t, err, "helios was not killed at %s: %s", point, stderr.String())

			dry := decode[recovery.Report](t, mcpkeep(t, "doctor", "--home", home, "--json"))
			fixed := decode[recovery.Report](t, mcpkeep(t, "doctor", "--home", home, "--fix", "--json"))
			t.Logf("dry run:\n%s\n--fix:\n%s", dry, fixed)
			// The same finding: a repair of the repository is the same
			// one when the words after the verb begin alike ("would roll
			// forward the change", "rolled forward the change").
			same := func(dry, fix recovery.Finding) bool {
				if dry.Kind != fix.Kind || dry.Path != fix.Path {
					return false
				}
				d, f := strings.Fields(dry.Action), strings.Fields(fix.Action)
				return dry.Kind != recovery.KindGitRepair || len(d) > 4 && len(f) > 3 && slices.Equal(d[2:5], f[1:4])
			}
			for _, f := range dry.Findings {
				assert.NotContains(t, f.Action, "would repair:", "the future tense: %s", f)
				if f.Kind == recovery.KindUncommitted && strings.Contains(f.Action, "unless the roll-forward") {
					continue
				}
				found := false
				for _, g := range fixed.Findings {
					found = found || f.Kind == g.Kind && f.Path == g.Path
				}
				assert.True(t, found, "the dry run's %q is not --fix's", f)
			}
			for _, g := range fixed.Findings {
				if g.Kind == recovery.KindGitRepair && strings.HasPrefix(g.Action, "rebuilt .git/index") {
					assert.NotEmpty(t, dry.Notes, "--fix rebuilt the index: the dry run says it may")
					continue
				}
				found := false
				for _, f := range dry.Findings {
					found = found || same(f, g)
				}
				assert.True(t, found, "--fix's %q is not in the dry run", g)
			}
		})
	}
}
