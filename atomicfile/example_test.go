package atomicfile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// Replace a file so that readers, and a crash, see the old or the new bytes.
func ExampleWriteFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config.yaml")

	if err := atomicfile.WriteFile(path, []byte("tone: neutral\n"), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output: tone: neutral
}

// Write YAML, then read it back strictly; a corrupt file names itself and
// its line.
func ExampleReadYAMLStrict() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "persona.yaml")

	type persona struct {
		Name string `yaml:"name"`
	}
	_ = atomicfile.WriteYAML(path, persona{Name: "default"}, 0)
	var p persona
	fmt.Println(atomicfile.ReadYAMLStrict(path, &p), p.Name)

	_ = os.WriteFile(path, []byte("name: ok\n\tbroken: [\n"), 0o600)
	err := atomicfile.ReadYAMLStrict(path, &p)
	var ce *atomicfile.CorruptError
	fmt.Println(errors.As(err, &ce), ce.Line)
	// Output:
	// <nil> default
	// true 2
}

// After a crash, remove the temporary files of interrupted writes. Only
// files named as this package names its temporaries are removed.
func ExampleCleanTemps() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, ".config.yaml.mcpkeep-tmp4242424242424242424"), []byte("half"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("whole"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, ".log.20240101123045123"), []byte("a user's"), 0o600)

	removed, _ := atomicfile.CleanTemps(dir)
	fmt.Println(len(removed), filepath.Base(removed[0]))
	// Output: 1 .config.yaml.mcpkeep-tmp4242424242424242424
}

// Replace several files durably at about the cost of one. Each is replaced
// atomically; where one must not be durable before another, use two calls.
func ExampleWriteFiles() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	err := atomicfile.WriteFiles(
		atomicfile.File{Path: filepath.Join(dir, "base.yaml"), Data: []byte("active: default\n")},
		atomicfile.File{Path: filepath.Join(dir, "default.yaml"), Data: []byte("tone: warm\n")},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"base.yaml", "default.yaml"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		fmt.Print(string(b))
	}
	// Output:
	// active: default
	// tone: warm
}

// Read the files of a config tree that others may write: no link below the
// root is followed, no pipe waited on, no file over the limit read.
func ExampleReader() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	secret := filepath.Join(dir, "id_ed25519")
	_ = os.WriteFile(secret, []byte("PRIVATE KEY\n"), 0o600)
	config := filepath.Join(dir, "config")
	_ = os.Mkdir(config, 0o700)
	_ = os.Symlink(secret, filepath.Join(config, "persona.yaml"))

	r := atomicfile.Reader{Root: config, MaxSize: 64 << 10}
	var p struct{ Name string }
	err := r.ReadYAMLStrict(filepath.Join(config, "persona.yaml"), &p)
	var refused *atomicfile.RefusedError
	if errors.As(err, &refused) {
		fmt.Println(filepath.Base(refused.Path), "is", refused.Kind(), errors.Is(err, atomicfile.ErrNotRegular))
	}
	// Output: persona.yaml is a symbolic link true
}

// Read a config file on every call of a tool, decoding it only when it
// changed: a change by this process, by another or by hand is seen at the
// next Read.
func ExampleCache() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "persona.yaml")
	_ = atomicfile.WriteFile(path, []byte("name: default\ntone: neutral\n"), 0)

	type persona struct {
		Name string `yaml:"name"`
		Tone string `yaml:"tone"`
	}
	personas := &atomicfile.Cache[persona]{
		Reader: atomicfile.Reader{Root: dir},
		Decode: func(path string, data []byte) (persona, error) {
			var p persona
			err := atomicfile.ParseYAMLStrict(path, data, &p)
			return p, err
		},
	}
	p, _ := personas.Read(path)
	fmt.Println(p.Tone)
	_ = os.WriteFile(path, []byte("name: default\ntone: warm\n"), 0o600) // by hand
	p, _ = personas.Read(path)
	fmt.Println(p.Tone)
	// Output:
	// neutral
	// warm
}
