package bootstrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
)

// TestBootRecordsMaxFileSize: each boot record stamps Spec.MaxFileSize,
// deferred or not, and Detect reads it back: the default is not written,
// so a server at the defaults stamps what an older mcpkeep stamped.
func TestBootRecordsMaxFileSize(t *testing.T) {
	for _, tc := range []struct {
		name        string
		limit, want int64
	}{
		{"unset", 0, 0},
		{"the default", atomicfile.DefaultMaxSize, 0},
		{"larger", 4 << 20, 4 << 20},
		{"smaller", 1000, 1000},
		{"none", -7, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			s := spec(home)
			s.MaxFileSize = tc.limit
			res, err := bootstrap.Ensure(t.Context(), s) // the install's stamp
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.After.MaxFileSize)
			info, err := bootstrap.Detect(home, 1)
			require.NoError(t, err)
			assert.Equal(t, tc.want, info.MaxFileSize)
			data, err := os.ReadFile(filepath.Join(home, bootstrap.VersionFile))
			require.NoError(t, err)
			assert.Equal(t, tc.want != 0, strings.Contains(string(data), `"max_file_size"`), "%s", data)

			s.MaxFileSize, s.DeferBoot = 0, true // a restart at the default
			res, err = bootstrap.Ensure(t.Context(), s)
			require.NoError(t, err)
			info, err = bootstrap.Detect(home, 1)
			require.NoError(t, err)
			assert.Equal(t, tc.want, info.MaxFileSize, "the stamp waits for RecordBoot")
			require.NoError(t, res.RecordBoot())
			info, err = bootstrap.Detect(home, 1)
			require.NoError(t, err)
			assert.Zero(t, info.MaxFileSize, "each start records its own limit")
		})
	}
}

// TestStampCompatibility: a stamp written before max_file_size existed
// reads as the default limit, and one with a field this mcpkeep does not
// know (a newer mcpkeep's, of the same schema) still reads as Ready and
// is not quarantined.
func TestStampCompatibility(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	_, err := bootstrap.Ensure(t.Context(), spec(home))
	require.NoError(t, err)
	path := filepath.Join(home, bootstrap.VersionFile)
	for name, stamp := range map[string]string{
		"old":   `{"schema":1,"toolkit_version":"v0.1.0","installed_at":"2026-01-01T00:00:00Z","last_boot_at":"2026-01-02T00:00:00Z","boots":3}`,
		"newer": `{"schema":1,"toolkit_version":"v9.0.0","installed_at":"2026-01-01T00:00:00Z","last_boot_at":"2026-01-02T00:00:00Z","boots":3,"some_later_field":{"x":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, []byte(stamp), 0o600))
			info, err := bootstrap.Detect(home, 1)
			require.NoError(t, err)
			assert.Equal(t, bootstrap.Ready, info.State, info.Detail)
			assert.Equal(t, 3, info.Boots)
			assert.Zero(t, info.MaxFileSize)
			res, err := bootstrap.Ensure(t.Context(), spec(home))
			require.NoError(t, err)
			assert.False(t, res.Resumed, "not taken for an interrupted install")
			assert.Equal(t, 4, res.After.Boots)
		})
	}
}
