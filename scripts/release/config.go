package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
)

// ConfigFile is where the release's names live, relative to the module
// root: the one place the npm packages, the wheels and the archives take
// their names from.
const ConfigFile = "packaging/release.json"

// config is packaging/release.json.
type config struct {
	// Name is the distribution's name on npm and PyPI and the stem of the
	// archives' names; the npm platform packages are Name-<os>-<cpu>.
	Name string `json:"name"`
	// Summary is one line: npm's description, the wheel's Summary.
	Summary    string `json:"summary"`
	Homepage   string `json:"homepage"`
	Repository string `json:"repository"`
	// License is an SPDX identifier; the LICENSE file goes in every package.
	License string `json:"license"`
	// Binaries maps each binary's name to the Go package it is built from.
	Binaries map[string]string `json:"binaries"`
	// Commands maps a command that npm's bin and the wheel's scripts
	// install to the binary it runs. The command named Name is the one
	// `npx Name`, `uvx Name` and `pipx run Name` run.
	Commands  map[string]string `json:"commands"`
	Platforms []platform        `json:"platforms"`
}

// platform is one operating system and CPU the release is built for, in
// each ecosystem's words.
type platform struct {
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	// NPMOS and NPMCPU are Node's process.platform and process.arch, the
	// values of a package.json's "os" and "cpu".
	NPMOS  string `json:"npm_os"`
	NPMCPU string `json:"npm_cpu"`
	// WheelTags are the platform tags of the wheel (PEP 425, PEP 600,
	// PEP 656), the most specific first.
	WheelTags []string `json:"wheel_tags"`
}

// String is "linux/amd64".
func (p platform) String() string { return p.GOOS + "/" + p.GOARCH }

// npmPackage is the name of the npm package holding p's binaries.
func (c *config) npmPackage(p platform) string { return c.Name + "-" + p.NPMOS + "-" + p.NPMCPU }

var (
	npmName    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*[a-z0-9]$`)
	simpleName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	wheelTag   = regexp.MustCompile(`^[a-z0-9_]+$`)
)

// loadConfig reads and checks path.
func loadConfig(path string) (*config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// check says what in c cannot make a release.
func (c *config) check() error {
	if !npmName.MatchString(c.Name) {
		return fmt.Errorf("name %q is not a lower-case npm and PyPI name (letters, digits, dashes)", c.Name)
	}
	if c.Summary == "" || c.License == "" || c.Homepage == "" || c.Repository == "" {
		return fmt.Errorf("summary, license, homepage and repository are all needed")
	}
	if len(c.Binaries) == 0 {
		return fmt.Errorf("binaries lists no binary")
	}
	for name := range c.Binaries {
		if !simpleName.MatchString(name) {
			return fmt.Errorf("binary name %q is not a plain file name", name)
		}
	}
	if _, ok := c.Commands[c.Name]; !ok {
		return fmt.Errorf("commands has no command named %q, the one npx, uvx and pipx run", c.Name)
	}
	for cmd, bin := range c.Commands {
		if !simpleName.MatchString(cmd) {
			return fmt.Errorf("command %q is not a plain file name", cmd)
		}
		if _, ok := c.Binaries[bin]; !ok {
			return fmt.Errorf("command %q runs %q, which binaries does not list", cmd, bin)
		}
	}
	if len(c.Platforms) == 0 {
		return fmt.Errorf("platforms lists no platform")
	}
	var seen []string
	for i, p := range c.Platforms {
		if p.GOOS == "" || p.GOARCH == "" || p.NPMOS == "" || p.NPMCPU == "" || len(p.WheelTags) == 0 {
			return fmt.Errorf("platforms[%d]: goos, goarch, npm_os, npm_cpu and wheel_tags are all needed", i)
		}
		for _, tag := range p.WheelTags {
			if !wheelTag.MatchString(tag) {
				return fmt.Errorf("platforms[%d]: wheel tag %q is not a platform tag", i, tag)
			}
		}
		if slices.Contains(seen, p.String()) {
			return fmt.Errorf("platforms[%d]: %s is listed twice", i, p)
		}
		seen = append(seen, p.String())
	}
	return nil
}

// version is a release version, in the form every ecosystem can say:
// vMAJOR.MINOR.PATCH with an optional -alpha.N, -beta.N, -rc.N or -dev.N.
type version struct {
	Major, Minor, Patch int
	Pre                 string // "", "alpha", "beta", "rc" or "dev"
	N                   int    // the pre-release's number
}

var versionRE = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-(alpha|beta|rc|dev)\.(0|[1-9]\d*))?$`)

// parseVersion parses s, a Go module version such as v1.2.3 or v1.2.3-rc.1.
func parseVersion(s string) (version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return version{}, fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH, optionally followed by -alpha.N, -beta.N, -rc.N or -dev.N", s)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	v := version{Major: atoi(m[1]), Minor: atoi(m[2]), Patch: atoi(m[3]), Pre: m[4]}
	if v.Pre != "" {
		v.N = atoi(m[5])
	}
	return v, nil
}

// Go is the version as Go writes it, the one binaries are stamped with:
// v1.2.3-rc.1.
func (v version) Go() string { return "v" + v.NPM() }

// NPM is the version as npm writes it (semver): 1.2.3-rc.1.
func (v version) NPM() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += fmt.Sprintf("-%s.%d", v.Pre, v.N)
	}
	return s
}

// Python is the version as PEP 440 writes it, normalized: 1.2.3rc1,
// 1.2.3a1, 1.2.3b1, 1.2.3.dev1.
func (v version) Python() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	switch v.Pre {
	case "alpha":
		s += fmt.Sprintf("a%d", v.N)
	case "beta":
		s += fmt.Sprintf("b%d", v.N)
	case "rc":
		s += fmt.Sprintf("rc%d", v.N)
	case "dev":
		s += fmt.Sprintf(".dev%d", v.N)
	}
	return s
}
