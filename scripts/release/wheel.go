package main

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// wheelName is the distribution name as a wheel's file name writes it
// (PEP 427, PEP 503 normalized): mcpkeep-helios gives mcpkeep_helios.
func wheelName(name string) string { return strings.ReplaceAll(name, "-", "_") }

// wheelFileName is the wheel's file name: name-version-py3-none-tags.whl,
// the platform tags joined with dots (a compressed tag set, PEP 425).
func wheelFileName(name, pyVersion string, tags []string) string {
	return fmt.Sprintf("%s-%s-py3-none-%s.whl", wheelName(name), pyVersion, strings.Join(tags, "."))
}

// wheel builds the wheel of one platform: the binaries as scripts of the
// wheel (<name>-<version>.data/scripts/<command>), which installers copy
// to the environment's bin directory as they are, so `uvx`, `pipx run` and
// a venv's bin run the Go binary with nothing in between; no Python code.
// bins maps a binary's name to its bytes; readme is the long description.
func wheel(c *config, v version, p platform, bins map[string][]byte, license, readme []byte, mtime time.Time) (string, []byte, error) {
	pyv := v.Python()
	stem := wheelName(c.Name) + "-" + pyv
	var files []file
	for _, cmd := range slices.Sorted(maps.Keys(c.Commands)) {
		data, ok := bins[c.Commands[cmd]]
		if !ok {
			return "", nil, fmt.Errorf("no %s binary for %s", c.Commands[cmd], p)
		}
		files = append(files, file{Name: stem + ".data/scripts/" + cmd, Data: data, Exec: true})
	}
	info := stem + ".dist-info/"
	files = append(files,
		file{Name: info + "LICENSE", Data: license},
		file{Name: info + "METADATA", Data: []byte(wheelMetadata(c, pyv, p, readme))},
		file{Name: info + "WHEEL", Data: []byte(wheelWheel(p))},
	)
	// RECORD lists every file with its hash and size, and itself last
	// with neither.
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.Name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.Data))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	files = append(files, file{Name: info + "RECORD", Data: []byte(record.String())})
	data, err := zipFiles(files, mtime)
	if err != nil {
		return "", nil, err
	}
	return wheelFileName(c.Name, pyv, p.WheelTags), data, nil
}

// wheelMetadata is the wheel's METADATA (core metadata 2.1, which every
// pip, pipx and uv reads).
func wheelMetadata(c *config, pyVersion string, p platform, readme []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n", c.Name, pyVersion, c.Summary)
	fmt.Fprintf(&b, "Home-page: %s\nLicense: %s\n", c.Homepage, c.License)
	fmt.Fprintf(&b, "Project-URL: Source, %s\n", c.Homepage)
	switch p.GOOS {
	case "linux":
		b.WriteString("Classifier: Operating System :: POSIX :: Linux\n")
	case "darwin":
		b.WriteString("Classifier: Operating System :: MacOS\n")
	}
	b.WriteString("Description-Content-Type: text/markdown\n\n")
	b.Write(readme)
	return b.String()
}

// wheelWheel is the wheel's WHEEL file: not pure Python (the scripts are
// one platform's binaries), one Tag line per tag.
func wheelWheel(p platform) string {
	var b strings.Builder
	b.WriteString("Wheel-Version: 1.0\nGenerator: mcpkeep scripts/release\nRoot-Is-Purelib: false\n")
	for _, t := range p.WheelTags {
		fmt.Fprintf(&b, "Tag: py3-none-%s\n", t)
	}
	return b.String()
}
