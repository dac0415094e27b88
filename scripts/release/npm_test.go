package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNPMPackages(t *testing.T) {
	c := repoConfig(t)
	v, err := parseVersion("v1.2.3")
	require.NoError(t, err)
	pkgs, err := npmPackages(c, v, fakeBins(c), []byte("// launcher"), []byte("license"), []byte("# readme"))
	require.NoError(t, err)
	require.Len(t, pkgs, 1+len(c.Platforms))

	read := func(name string) (map[string]any, map[string]file) {
		t.Helper()
		files := map[string]file{}
		for _, f := range pkgs[name] {
			files[f.Name] = f
		}
		require.Contains(t, files, "package.json", name)
		var pj map[string]any
		require.NoError(t, json.Unmarshal(files["package.json"].Data, &pj))
		return pj, files
	}
	main, files := read("mcpkeep-helios")
	assert.Equal(t, "mcpkeep-helios", main["name"])
	assert.Equal(t, "1.2.3", main["version"])
	assert.Equal(t, map[string]any{"mcpkeep-helios": "bin/mcpkeep-helios.js", "mcpkeep": "bin/mcpkeep.js"}, main["bin"])
	assert.NotContains(t, main, "scripts", "no install script: nothing is downloaded at install")
	assert.NotContains(t, main, "dependencies")
	for _, js := range []string{"bin/mcpkeep-helios.js", "bin/mcpkeep.js"} {
		assert.True(t, files[js].Exec, js)
		assert.Contains(t, string(files[js].Data), "#!/usr/bin/env node\n")
	}
	assert.Contains(t, string(files["bin/mcpkeep-helios.js"].Data), `launch("helios")`)
	var platforms map[string]string
	require.NoError(t, json.Unmarshal(files["lib/platforms.json"].Data, &platforms))
	assert.Equal(t, map[string]string{"linux-x64": "mcpkeep-helios-linux-x64", "linux-arm64": "mcpkeep-helios-linux-arm64",
		"darwin-x64": "mcpkeep-helios-darwin-x64", "darwin-arm64": "mcpkeep-helios-darwin-arm64"}, platforms,
		"keyed by Node's process.platform-process.arch")

	optional := main["optionalDependencies"].(map[string]any)
	assert.Len(t, optional, len(c.Platforms))
	for _, p := range c.Platforms {
		name := c.npmPackage(p)
		assert.Equal(t, "1.2.3", optional[name], "exactly this version of %s", name)
		pj, files := read(name)
		assert.Equal(t, name, pj["name"])
		assert.Equal(t, "1.2.3", pj["version"])
		assert.Equal(t, []any{p.NPMOS}, pj["os"])
		assert.Equal(t, []any{p.NPMCPU}, pj["cpu"])
		for b := range c.Binaries {
			f := files["bin/"+b]
			assert.True(t, f.Exec, "%s bin/%s", name, b)
			assert.Equal(t, "binary "+b+" for "+p.String(), string(f.Data))
		}
	}
}

// TestPackageReadme: packaging/README.md renders, with the versions each
// launcher pins in its own form.
func TestPackageReadme(t *testing.T) {
	v, err := parseVersion("v1.2.3-rc.4")
	require.NoError(t, err)
	r := &release{root: repoRoot(t), cfg: repoConfig(t), version: v}
	readme, err := r.packageReadme()
	require.NoError(t, err)
	for _, want := range []string{"npx -y mcpkeep-helios@1.2.3-rc.4 ", "uvx mcpkeep-helios@1.2.3rc4 ",
		"pipx run --spec mcpkeep-helios==1.2.3rc4 mcpkeep-helios ", "release v1.2.3-rc.4 of helios"} {
		assert.Contains(t, string(readme), want)
	}
}
