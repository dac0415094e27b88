package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// npmPackages returns the npm packages of a release, each a directory
// name (the package's name) and its files, in the layout esbuild and Biome
// use: a main package whose bin is a small Node launcher, and one package
// per platform holding the binaries, with "os" and "cpu" so that npm
// installs only the one that fits. The main package lists them all in
// optionalDependencies at exactly this version; nothing is downloaded by
// an install script. bins maps a platform's String to its binaries.
func npmPackages(c *config, v version, bins map[string]map[string][]byte, launcher, license, readme []byte) (map[string][]file, error) {
	out := map[string][]file{}
	optional := map[string]string{}
	platforms := map[string]string{}
	for _, p := range c.Platforms {
		name := c.npmPackage(p)
		optional[name] = v.NPM()
		platforms[p.NPMOS+"-"+p.NPMCPU] = name
		pj, err := packageJSON(map[string]any{
			"name":        name,
			"version":     v.NPM(),
			"description": fmt.Sprintf("The %s %s binaries of %s; install %s, not this.", p.NPMOS, p.NPMCPU, c.Name, c.Name),
			"license":     c.License,
			"homepage":    c.Homepage,
			"repository":  map[string]string{"type": "git", "url": "git+" + c.Repository},
			"os":          []string{p.NPMOS},
			"cpu":         []string{p.NPMCPU},
			// Yarn PnP: keep the binaries on disk, where they can be run.
			"preferUnplugged": true,
		})
		if err != nil {
			return nil, err
		}
		files := []file{{Name: "package.json", Data: pj}, {Name: "LICENSE", Data: license}, {Name: "README.md", Data: readme}}
		for _, b := range slices.Sorted(maps.Keys(c.Binaries)) {
			data, ok := bins[p.String()][b]
			if !ok {
				return nil, fmt.Errorf("no %s binary for %s", b, p)
			}
			files = append(files, file{Name: "bin/" + b, Data: data, Exec: true})
		}
		out[name] = files
	}
	bin := map[string]string{}
	files := []file{{Name: "LICENSE", Data: license}, {Name: "README.md", Data: readme}, {Name: "lib/launcher.js", Data: launcher}}
	for _, cmd := range slices.Sorted(maps.Keys(c.Commands)) {
		bin[cmd] = "bin/" + cmd + ".js"
		script := fmt.Sprintf("#!/usr/bin/env node\n// Runs this platform's %s binary (made by scripts/release from packaging/npm).\n"+
			"require(\"../lib/launcher.js\").launch(%q);\n", c.Commands[cmd], c.Commands[cmd])
		files = append(files, file{Name: bin[cmd], Data: []byte(script), Exec: true})
	}
	pl, err := packageJSON(platforms)
	if err != nil {
		return nil, err
	}
	files = append(files, file{Name: "lib/platforms.json", Data: pl})
	pj, err := packageJSON(map[string]any{
		"name":                 c.Name,
		"version":              v.NPM(),
		"description":          c.Summary,
		"license":              c.License,
		"homepage":             c.Homepage,
		"repository":           map[string]string{"type": "git", "url": "git+" + c.Repository},
		"bin":                  bin,
		"engines":              map[string]string{"node": ">=18"},
		"optionalDependencies": optional,
	})
	if err != nil {
		return nil, err
	}
	out[c.Name] = append(files, file{Name: "package.json", Data: pj})
	return out, nil
}

// packageJSON is v as indented JSON with a final newline; maps give their
// keys sorted, so the bytes do not vary.
func packageJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // ">=18", not "\u003e=18"
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
