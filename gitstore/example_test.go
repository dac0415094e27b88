package gitstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpkeep/mcpkeep/gitstore"
)

// newConfig returns a temporary config directory holding base.yaml, and a
// function that removes it.
func newConfig() (string, func()) {
	dir, _ := os.MkdirTemp("", "config")
	_ = os.WriteFile(filepath.Join(dir, "base.yaml"), []byte("tone: neutral\n"), 0o600)
	return dir, func() { os.RemoveAll(dir) }
}

// Version a config directory: Init makes it a repository, Commit records
// every change and commits nothing when nothing changed.
func ExampleInit() {
	dir, cleanup := newConfig()
	defer cleanup()

	s, err := gitstore.Init(dir, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	first, err := s.Commit("install")
	if err != nil {
		fmt.Println(err)
		return
	}
	again, _ := s.Commit("nothing changed")
	fmt.Println(len(first), len(again))
	// Output: 40 0
}

// CommitChecked commits the hand edits it can: a link in the work tree,
// and a changed file the check refuses, stay as the last commit had them,
// and the error names them beside the commit of the rest.
func ExampleStore_CommitChecked() {
	dir, cleanup := newConfig()
	defer cleanup()
	s, _ := gitstore.Init(dir, nil)
	defer s.Close()
	_, _ = s.Commit("install")

	_ = os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte("search: on\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "base.yaml"), []byte("tone: [\n"), 0o600)
	_ = os.Symlink("/etc/hostname", filepath.Join(dir, "host.yaml"))
	notBroken := func(path string, data []byte) error {
		if bytes.Count(data, []byte("[")) != bytes.Count(data, []byte("]")) {
			return errors.New("an unclosed [")
		}
		return nil
	}
	hash, err := s.CommitChecked("hand edits", notBroken)
	var left *gitstore.LeftOutError
	if errors.As(err, &left) {
		for _, f := range left.Files {
			fmt.Println("left out:", f.Path)
		}
	}
	fmt.Println("committed:", hash != "")
	// Output:
	// left out: base.yaml
	// left out: host.yaml
	// committed: true
}

// Commit stages adds, edits and deletes alike; Dirty tells whether there is
// anything to commit.
func ExampleStore_Commit() {
	dir, cleanup := newConfig()
	defer cleanup()
	s, _ := gitstore.Init(dir, nil)
	defer s.Close()
	_, _ = s.Commit("install")

	_ = os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte("search: on\n"), 0o600)
	_ = os.Remove(filepath.Join(dir, "base.yaml"))
	dirty, _ := s.Dirty()
	fmt.Println("dirty:", dirty)
	if _, err := s.Commit("add tools, drop base"); err != nil {
		fmt.Println(err)
		return
	}
	dirty, _ = s.Dirty()
	fmt.Println("dirty:", dirty)
	// Output:
	// dirty: true
	// dirty: false
}

// History lists the commits that changed a path, newest first.
func ExampleStore_History() {
	dir, cleanup := newConfig()
	defer cleanup()
	s, _ := gitstore.Init(dir, nil)
	defer s.Close()
	_, _ = s.Commit("install")
	_ = os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte("search: on\n"), 0o600)
	_, _ = s.Commit("add tools")
	_ = os.WriteFile(filepath.Join(dir, "base.yaml"), []byte("tone: warm\n"), 0o600)
	_, _ = s.Commit("warmer tone")

	commits, err := s.History("base.yaml", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range commits {
		fmt.Println(c.Message, "by", c.Author)
	}
	// Output:
	// warmer tone by mcpkeep
	// install by mcpkeep
}

// ReadAt reads a file as it was at a revision: a hash from History,
// HEAD~N, or a tag.
func ExampleStore_ReadAt() {
	dir, cleanup := newConfig()
	defer cleanup()
	s, _ := gitstore.Init(dir, nil)
	defer s.Close()
	_, _ = s.Commit("install")
	_ = s.Tag("v1", "as installed")
	_ = os.WriteFile(filepath.Join(dir, "base.yaml"), []byte("tone: warm\n"), 0o600)
	_, _ = s.Commit("warmer tone")

	for _, rev := range []string{"HEAD", "HEAD~1", "v1"} {
		b, err := s.ReadAt(rev, "base.yaml")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s", rev, b)
	}
	// Output:
	// HEAD: tone: warm
	// HEAD~1: tone: neutral
	// v1: tone: neutral
}

// Restore puts one file back as it was, without committing or moving HEAD.
func ExampleStore_Restore() {
	dir, cleanup := newConfig()
	defer cleanup()
	s, _ := gitstore.Init(dir, nil)
	defer s.Close()
	installed, _ := s.Commit("install")
	_ = os.WriteFile(filepath.Join(dir, "base.yaml"), []byte("tone: [broken\n"), 0o600)

	if err := s.Restore("base.yaml", installed); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(dir, "base.yaml"))
	dirty, _ := s.Dirty()
	fmt.Printf("%sdirty: %t\n", b, dirty)
	// Output:
	// tone: neutral
	// dirty: false
}

// Rollback makes the whole tree equal to an earlier revision as a new
// commit: the history keeps the change it undoes.
func ExampleStore_Rollback() {
	dir, cleanup := newConfig()
	defer cleanup()
	s, _ := gitstore.Init(dir, nil)
	defer s.Close()
	installed, _ := s.Commit("install")
	_ = os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte("search: on\n"), 0o600)
	_, _ = s.Commit("add tools")

	if _, err := s.Rollback(installed, "roll back to the install"); err != nil {
		fmt.Println(err)
		return
	}
	_, err := os.Stat(filepath.Join(dir, "tools.yaml"))
	fmt.Println("tools.yaml gone:", os.IsNotExist(err))
	commits, _ := s.History("", 0)
	for _, c := range commits {
		fmt.Println(c.Message)
	}
	// Output:
	// tools.yaml gone: true
	// roll back to the install
	// add tools
	// install
}

// Open repairs what a crash left, and says what it repaired; with ReadOnly
// it only says what it would repair.
func ExampleOpen() {
	dir, cleanup := newConfig()
	defer cleanup()
	s, _ := gitstore.Init(dir, nil)
	_, _ = s.Commit("install")
	s.Close()
	// What go-git alone leaves after a kill at the wrong moment.
	_ = os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), nil, 0o644)

	ro, err := gitstore.Open(dir, &gitstore.Options{ReadOnly: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(ro.Repairs()), "repair listed, read-only")
	ro.Close()

	s, err = gitstore.Open(dir, &gitstore.Options{HoldsLock: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	head, _ := s.Head()
	fmt.Println(len(s.Repairs()), "repair made, HEAD restored:", head != "")
	// Output:
	// 1 repair listed, read-only
	// 1 repair made, HEAD restored: true
}
