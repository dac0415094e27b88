package helios

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// Schema is the version of helios's config layout. Bump it and add a
// bootstrap.Migration to Spec when the layout changes.
const Schema = 1

//go:embed defaults
var embedded embed.FS

// Defaults is the tree of default config files, rooted like config/.
var Defaults = must(fs.Sub(embedded, "defaults"))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return v
}

const (
	baseFile    = "base.yaml"
	personasDir = "personas"
)

// Base is config/base.yaml.
type Base struct {
	Name          string `yaml:"name" json:"name"`                     // the configuration's name, "helios" by default
	ActivePersona string `yaml:"active_persona" json:"active_persona"` // a persona's name, as in personas/<name>.yaml
}

// Persona is config/personas/<name>.yaml.
type Persona struct {
	Name        string            `yaml:"name" json:"name"`                                   // the file's name without .yaml
	Description string            `yaml:"description,omitempty" json:"description,omitempty"` // for people; optional
	Preferences map[string]string `yaml:"preferences" json:"preferences"`                     // key (e.g. tone) to value
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	keyRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

const maxValue = 4096

func personaPath(name string) string { return personasDir + "/" + name + ".yaml" }

func checkPersonaName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("persona name %q: use 1-64 of a-z, 0-9, '_' and '-', starting with a letter or digit", name)
	}
	return nil
}

// config reads and writes helios's files in one config directory.
type config struct {
	dir string
	// read reads the files: rooted at dir, no link followed, size-limited.
	read atomicfile.Reader
	// explain adds the remedy to a disk or permission error; nil leaves
	// errors as they are.
	explain func(error) error
	// bases and personaFiles keep base.yaml and the persona files decoded
	// between calls, read through read and read again when they change
	// on disk (atomicfile.Cache): get_persona reads both on every call.
	bases        *atomicfile.Cache[Base]
	personaFiles *atomicfile.Cache[Persona]
}

// newConfig returns the config of dir, read through read.
func newConfig(dir string, read atomicfile.Reader, explain func(error) error) config {
	return config{dir: dir, read: read, explain: explain,
		bases:        &atomicfile.Cache[Base]{Reader: read, Decode: decodeStrict[Base]},
		personaFiles: &atomicfile.Cache[Persona]{Reader: read, Decode: decodeStrict[Persona], Clone: clonePersona}}
}

// decodeStrict decodes a YAML file as ReadYAMLStrict does.
func decodeStrict[T any](path string, data []byte) (T, error) {
	var v T
	err := atomicfile.ParseYAMLStrict(path, data, &v)
	return v, err
}

// clonePersona returns a copy of p whose preferences can be changed
// without changing p's.
func clonePersona(p Persona) Persona {
	p.Preferences = maps.Clone(p.Preferences)
	return p
}

// wrap returns err explained, if there is an explain function.
func (c config) wrap(err error) error {
	if c.explain == nil || err == nil {
		return err
	}
	return c.explain(err)
}

func (c config) path(rel string) string { return filepath.Join(c.dir, filepath.FromSlash(rel)) }

func (c config) base() (Base, error) {
	b, err := c.bases.Read(c.path(baseFile))
	return b, c.wrap(err)
}

func (c config) persona(name string) (Persona, error) {
	if err := checkPersonaName(name); err != nil {
		return Persona{}, err
	}
	p, err := c.personaFiles.Read(c.path(personaPath(name)))
	if errors.Is(err, fs.ErrNotExist) {
		names, _ := c.personas()
		return p, fmt.Errorf("no persona %q (have: %s)", name, strings.Join(names, ", "))
	}
	if p.Preferences == nil {
		p.Preferences = map[string]string{}
	}
	return p, c.wrap(err)
}

func (c config) personas() ([]string, error) {
	// Not through a link: the names of another directory's files are not
	// helios's to list.
	dir := c.path(personasDir)
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		return nil, c.wrap(&atomicfile.RefusedError{Path: dir, Mode: fi.Mode().Type()})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, c.wrap(err)
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && e.Type().IsRegular() && nameRE.MatchString(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Validate checks one config file's bytes, rel being its path relative to
// config/: it is the recovery hook, so a file that parses as YAML but is not
// a helios file is caught too.
func Validate(rel string, data []byte) error {
	rel = filepath.ToSlash(rel)
	switch {
	case rel == baseFile:
		var b Base
		if err := atomicfile.ParseYAML(rel, data, &b); err != nil {
			return err
		}
		return checkPersonaName(b.ActivePersona)
	case strings.HasPrefix(rel, personasDir+"/") && strings.HasSuffix(rel, ".yaml"):
		var p Persona
		if err := atomicfile.ParseYAML(rel, data, &p); err != nil {
			return err
		}
		if want := strings.TrimSuffix(filepath.Base(rel), ".yaml"); p.Name != want {
			return fmt.Errorf("%s: name is %q, want %q (the file name)", rel, short(p.Name), want)
		}
	}
	return nil
}

// short returns s, or its first atomicfile.MaxExcerpt bytes and "…": a
// value of a file quoted in an error, which may reach a client.
func short(s string) string {
	if len(s) <= atomicfile.MaxExcerpt {
		return s
	}
	cut := atomicfile.MaxExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ValidateDir checks a whole config directory, after migrations.
func ValidateDir(dir string) error {
	c := newConfig(dir, atomicfile.Reader{Root: dir}, nil)
	b, err := c.base()
	if err != nil {
		return err
	}
	if _, err := c.persona(b.ActivePersona); err != nil {
		return fmt.Errorf("%s: active_persona: %w", c.path(baseFile), err)
	}
	return nil
}
