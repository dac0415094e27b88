package recovery_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/recovery"
)

// TestStaleStateUnderAPatternPath: a dead server's state file is moved
// aside, and the oldest copies pruned, in a home whose path holds a
// pattern's metacharacters.
func TestStaleStateUnderAPatternPath(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h[1")
	backups := filepath.Join(home, recovery.BackupsDir)
	require.NoError(t, os.MkdirAll(backups, 0o700))
	for i := range 6 {
		require.NoError(t, os.WriteFile(filepath.Join(backups, "stale-2026010"+strconv.Itoa(i)+"T000000.000000000Z-state.json"), nil, 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(home, "state.json"), []byte(`{"schema":1,"name":"todo","pid":999999,"start_time":1,"home":"`+
		home+`","stdio":true,"started_at":"2026-11-22T10:02:00Z","status":"ready"}`), 0o600))

	report, err := recovery.MoveStaleState(recovery.Options{Home: home})
	require.NoError(t, err)
	require.Len(t, report.Findings, 1)
	assert.Contains(t, report.Findings[0].Action, "removed the oldest stale state copies, keeping 5")
	assert.NoFileExists(t, filepath.Join(home, "state.json"))
	entries, err := os.ReadDir(backups)
	require.NoError(t, err)
	assert.Len(t, entries, 5)
}
