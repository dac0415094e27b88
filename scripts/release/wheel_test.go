package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBins are stand-in binaries for every platform of c.
func fakeBins(c *config) map[string]map[string][]byte {
	bins := map[string]map[string][]byte{}
	for _, p := range c.Platforms {
		bins[p.String()] = map[string][]byte{}
		for b := range c.Binaries {
			bins[p.String()][b] = []byte("binary " + b + " for " + p.String())
		}
	}
	return bins
}

func TestWheel(t *testing.T) {
	c := repoConfig(t)
	v, err := parseVersion("v1.2.3-rc.4")
	require.NoError(t, err)
	p := c.Platforms[0]
	bins := fakeBins(c)[p.String()]
	name, data, err := wheel(c, v, p, bins, []byte("license"), []byte("# readme\n"), when)
	require.NoError(t, err)
	assert.Equal(t, "mcpkeep_helios-1.2.3rc4-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_2_x86_64.whl", name)
	_, again, err := wheel(c, v, p, bins, []byte("license"), []byte("# readme\n"), when)
	require.NoError(t, err)
	assert.Equal(t, data, again, "deterministic")

	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	contents := map[string][]byte{}
	var order []string
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		contents[f.Name] = b
		order = append(order, f.Name)
		if strings.Contains(f.Name, ".data/scripts/") {
			assert.Equal(t, os.FileMode(0o755), f.Mode().Perm(), "%s is executable", f.Name)
		}
	}
	assert.Equal(t, []string{
		"mcpkeep_helios-1.2.3rc4.data/scripts/mcpkeep",
		"mcpkeep_helios-1.2.3rc4.data/scripts/mcpkeep-helios",
		"mcpkeep_helios-1.2.3rc4.dist-info/LICENSE",
		"mcpkeep_helios-1.2.3rc4.dist-info/METADATA",
		"mcpkeep_helios-1.2.3rc4.dist-info/WHEEL",
		"mcpkeep_helios-1.2.3rc4.dist-info/RECORD",
	}, order, "the binaries as scripts, RECORD last")
	assert.Equal(t, bins["helios"], contents["mcpkeep_helios-1.2.3rc4.data/scripts/mcpkeep-helios"], "the command npx/uvx/pipx run is helios")
	assert.Equal(t, bins["mcpkeep"], contents["mcpkeep_helios-1.2.3rc4.data/scripts/mcpkeep"])

	// RECORD: every other file with its hash and size; itself without.
	records, err := csv.NewReader(bytes.NewReader(contents["mcpkeep_helios-1.2.3rc4.dist-info/RECORD"])).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, len(order))
	for _, r := range records {
		if r[0] == "mcpkeep_helios-1.2.3rc4.dist-info/RECORD" {
			assert.Equal(t, []string{r[0], "", ""}, r)
			continue
		}
		b, ok := contents[r[0]]
		require.True(t, ok, "RECORD lists %s, which the wheel has", r[0])
		sum := sha256.Sum256(b)
		assert.Equal(t, "sha256="+base64.RawURLEncoding.EncodeToString(sum[:]), r[1], r[0])
		assert.Equal(t, strconv.Itoa(len(b)), r[2], r[0])
	}

	meta := string(contents["mcpkeep_helios-1.2.3rc4.dist-info/METADATA"])
	for _, line := range []string{"Metadata-Version: 2.1\n", "Name: mcpkeep-helios\n", "Version: 1.2.3rc4\n",
		"License: Apache-2.0\n", "Description-Content-Type: text/markdown\n\n# readme\n"} {
		assert.Contains(t, meta, line)
	}
	assert.Equal(t, "Wheel-Version: 1.0\nGenerator: mcpkeep scripts/release\nRoot-Is-Purelib: false\n"+
		"Tag: py3-none-manylinux_2_17_x86_64\nTag: py3-none-manylinux2014_x86_64\nTag: py3-none-musllinux_1_2_x86_64\n",
		string(contents["mcpkeep_helios-1.2.3rc4.dist-info/WHEEL"]))
}
