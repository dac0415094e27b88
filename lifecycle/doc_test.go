package lifecycle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocSaysWhoseSentinel: a sentinel that lifecycle and gitstore both
// declare (ErrBadPath) is never named bare in lifecycle's doc comments,
// which `go doc` prints as plain text: a reader cannot tell whose it is
// and may test for the wrong one. Only the sentinel's own doc comment,
// which `go doc` shows under lifecycle's name, may start with it.
func TestDocSaysWhoseSentinel(t *testing.T) {
	fset := token.NewFileSet()
	ours, files := sentinels(t, fset, ".")
	theirs, _ := sentinels(t, fset, "../gitstore")
	shared := 0
	for name, own := range ours {
		if _, ok := theirs[name]; !ok {
			continue
		}
		shared++
		bare := regexp.MustCompile(`(^|[^.\w\[])` + name + `\b`)
		for _, f := range files {
			for _, cg := range f.Comments {
				text := cg.Text()
				if cg == own {
					text = strings.TrimPrefix(text, name)
				}
				for _, line := range strings.Split(text, "\n") {
					assert.False(t, bare.MatchString(line),
						"%s: %q names %s bare, and gitstore declares one too: write lifecycle.%[3]s or gitstore.%[3]s",
						fset.Position(cg.Pos()), line, name)
				}
			}
		}
	}
	require.NotZero(t, shared, "no sentinel is declared by both packages: this test checks nothing")
}

// sentinels parses the package in dir, without its tests, and returns its
// exported Err* variables, each with its doc comment, and its files.
func sentinels(t *testing.T, fset *token.FileSet, dir string) (map[string]*ast.CommentGroup, []*ast.File) {
	t.Helper()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	require.NoError(t, err)
	vars := map[string]*ast.CommentGroup{}
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					doc := vs.Doc
					if doc == nil {
						doc = g.Doc
					}
					for _, n := range vs.Names {
						if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
							vars[n.Name] = doc
						}
					}
				}
			}
		}
	}
	return vars, files
}
