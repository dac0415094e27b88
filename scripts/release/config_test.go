package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoConfig is the repository's own packaging/release.json.
func repoConfig(t testing.TB) *config {
	t.Helper()
	c, err := loadConfig(filepath.Join("..", "..", ConfigFile))
	require.NoError(t, err)
	return c
}

func TestRepoConfig(t *testing.T) {
	c := repoConfig(t)
	var got []string
	for _, p := range c.Platforms {
		got = append(got, p.String())
	}
	assert.Equal(t, []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}, got)
	assert.Equal(t, "helios", c.Commands[c.Name], "npx, uvx and pipx run the command named like the package: helios")
}

func TestConfigRefusesWhatCannotShip(t *testing.T) {
	for name, edit := range map[string]func(*config){
		"bad name":              func(c *config) { c.Name = "Mcpkeep Helios" },
		"no command named Name": func(c *config) { delete(c.Commands, c.Name) },
		"command of no binary":  func(c *config) { c.Commands["x"] = "nothing" },
		"no platform":           func(c *config) { c.Platforms = nil },
		"platform twice":        func(c *config) { c.Platforms = append(c.Platforms, c.Platforms[0]) },
		"bad wheel tag":         func(c *config) { c.Platforms[0].WheelTags = []string{"linux x86"} },
		"no summary":            func(c *config) { c.Summary = "" },
	} {
		t.Run(name, func(t *testing.T) {
			c := repoConfig(t)
			edit(c)
			assert.Error(t, c.check())
		})
	}
	path := filepath.Join(t.TempDir(), "release.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"name": "x", "typo": 1}`), 0o600))
	_, err := loadConfig(path)
	assert.ErrorContains(t, err, path, "an unknown field is an error naming the file")
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct{ in, npm, python string }{
		{"v1.2.3", "1.2.3", "1.2.3"},
		{"v0.1.0-rc.2", "0.1.0-rc.2", "0.1.0rc2"},
		{"v0.1.0-alpha.1", "0.1.0-alpha.1", "0.1.0a1"},
		{"v0.1.0-beta.0", "0.1.0-beta.0", "0.1.0b0"},
		{"v0.0.0-dev.218", "0.0.0-dev.218", "0.0.0.dev218"},
	} {
		v, err := parseVersion(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.in, v.Go())
		assert.Equal(t, tc.npm, v.NPM())
		assert.Equal(t, tc.python, v.Python())
	}
	for _, bad := range []string{"1.2.3", "v1.2", "v01.2.3", "v1.2.3-rc1", "v1.2.3-foo.1", "v1.2.3+meta", ""} {
		_, err := parseVersion(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// FuzzParseVersion: a version that parses is said back as it was given,
// and its npm and PEP 440 forms name the same release numbers.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"v1.2.3", "v0.1.0-rc.2", "v0.0.0-dev.218", "v1.2", "v01.2.3", "v1.2.3-rc1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseVersion(s)
		if err != nil {
			return
		}
		assert.Equal(t, s, v.Go())
		prefix := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
		assert.True(t, strings.HasPrefix(v.NPM(), prefix), v.NPM())
		assert.True(t, strings.HasPrefix(v.Python(), prefix), v.Python())
		again, err := parseVersion("v" + v.NPM())
		require.NoError(t, err)
		assert.Equal(t, v, again)
	})
}
