package doccheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/mcpkeep/mcpkeep"

// pkg is what go list says of one package.
type pkg struct {
	ImportPath, Dir, Name     string
	GoFiles, IgnoredGoFiles   []string
	TestGoFiles, XTestGoFiles []string
}

// libraries returns the module's non-main packages.
func libraries(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-json", module+"/...").Output()
	require.NoError(t, err)
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		if p.Name != "main" && len(p.GoFiles)+len(p.IgnoredGoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

// parse parses the named files of p's directory that belong to package
// name (a file of another package, such as a generator, is skipped).
func parse(t *testing.T, fset *token.FileSet, p pkg, name string, files []string) []*ast.File {
	t.Helper()
	var out []*ast.File
	for _, f := range files {
		af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.ParseComments)
		require.NoError(t, err)
		if af.Name.Name == name {
			out = append(out, af)
		}
	}
	return out
}

func TestEveryLibraryPackageIsDocumented(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	for _, p := range libraries(t) {
		fset := token.NewFileSet()
		// Files for other platforms too: their exported names are API.
		files := parse(t, fset, p, p.Name, append(slices.Clone(p.GoFiles), p.IgnoredGoFiles...))
		if len(files) == 0 {
			continue
		}
		report := func(pos token.Pos, format string, args ...any) {
			position := fset.Position(pos)
			rel, err := filepath.Rel(root, position.Filename)
			if err != nil {
				rel = position.Filename
			}
			t.Errorf("%s:%d: %s", rel, position.Line, fmt.Sprintf(format, args...))
		}

		if !slices.ContainsFunc(files, func(f *ast.File) bool { return strings.HasPrefix(f.Doc.Text(), "Package "+p.Name+" ") }) {
			report(files[0].Package, "package %s has no package doc comment starting \"// Package %s \"", p.Name, p.Name)
		}
		for _, f := range files {
			checkFile(f, report)
			checkFields(f, report)
		}

		tests := parse(t, fset, p, p.Name, p.TestGoFiles)
		tests = append(tests, parse(t, fset, p, p.Name+"_test", p.XTestGoFiles)...)
		public := !strings.Contains(p.ImportPath+"/", "/internal/")
		if public && !hasRunnableExample(tests) {
			report(files[0].Package, "public package %s has no runnable Example (a func Example… with an // Output: comment in an _test.go file)", p.ImportPath)
		}
	}
}

// checkFile reports the exported names of f that have no doc comment:
// funcs, methods of exported types, types, vars and consts (a group's
// comment documents its members). Struct fields and interface methods are
// not checked.
func checkFile(f *ast.File, report func(token.Pos, string, ...any)) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			what := "func " + d.Name.Name
			if d.Recv != nil {
				recv := receiverType(d.Recv)
				if !ast.IsExported(recv) {
					continue // a method of an unexported type is not API
				}
				what = "method " + recv + "." + d.Name.Name
			}
			if d.Doc == nil {
				report(d.Pos(), "%s has no doc comment", what)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && (d.Doc == nil || d.Lparen.IsValid()) {
						report(s.Pos(), "type %s has no doc comment", s.Name.Name)
					}
				case *ast.ValueSpec:
					// A group's comment documents its members.
					documented := d.Doc != nil || s.Doc != nil || s.Comment != nil
					for _, n := range s.Names {
						if n.IsExported() && !documented {
							report(n.Pos(), "%s %s has no doc comment", d.Tok, n.Name)
						}
					}
				}
			}
		}
	}
}

// checkFields reports the exported fields of f's exported struct types
// that have no comment, above or beside them (a comment covers every name
// of its line). Embedded fields are not checked: their type documents
// them.
func checkFields(f *ast.File, report func(token.Pos, string, ...any)) {
	for _, decl := range f.Decls {
		d, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range d.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, field := range st.Fields.List {
				if field.Doc != nil || field.Comment != nil {
					continue
				}
				for _, n := range field.Names {
					if n.IsExported() {
						report(n.Pos(), "field %s.%s has no comment", ts.Name.Name, n.Name)
					}
				}
			}
		}
	}
}

// receiverType returns the name of a method's receiver type.
func receiverType(recv *ast.FieldList) string {
	t := recv.List[0].Type
	for {
		switch tt := t.(type) {
		case *ast.StarExpr:
			t = tt.X
		case *ast.IndexExpr:
			t = tt.X
		case *ast.IndexListExpr:
			t = tt.X
		case *ast.Ident:
			return tt.Name
		default:
			return ""
		}
	}
}

// hasRunnableExample reports whether the test files hold an Example that
// go test runs: one with an output comment.
func hasRunnableExample(tests []*ast.File) bool {
	for _, ex := range doc.Examples(tests...) {
		if ex.Output != "" || ex.EmptyOutput {
			return true
		}
	}
	return false
}

// TestCheckFile keeps the checker honest: what it must report and what it
// must let pass.
func TestCheckFile(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // findings, as "line: message"
	}{
		{"documented", `package p
// F does.
func F() {}
// T is.
type T int
// M does.
func (T) M() {}
// V is.
var V = 1
// Group.
const (
	A = 1
	B = 2
)
const (
	C = 3 // C is.
)
`, nil},
		{"unexported names and methods of unexported types", `package p
func f() {}
type t int
func (t) M() {}
func (*t) N() {}
var v = 1
`, nil},
		{"undocumented", `package p
func F() {}
type T struct{}
func (*T) M() {}
func (T) Error() string { return "" }
var V = 1
const (
	C = 3
)
type (
	// Group.
	U int
	W int
)
type G[K any] struct{}
func (G[K]) M() {}
`, []string{
			"2: func F has no doc comment",
			"3: type T has no doc comment",
			"4: method T.M has no doc comment",
			"5: method T.Error has no doc comment",
			"6: var V has no doc comment",
			"8: const C has no doc comment",
			"13: type W has no doc comment",
			"15: type G has no doc comment",
			"16: method G.M has no doc comment",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", tc.src, parser.ParseComments)
			require.NoError(t, err)
			var got []string
			checkFile(f, func(pos token.Pos, format string, args ...any) {
				got = append(got, fmt.Sprintf("%d: %s", fset.Position(pos).Line, fmt.Sprintf(format, args...)))
			})
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCheckFields(t *testing.T) {
	src := `package p
// T is.
type T struct {
	// A is.
	A int
	B, C int // B and C are.
	D    int
	E, f int
	g    int
	*T
	Nested struct {
		X int
	} // Nested is.
}
type u struct {
	A int
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	require.NoError(t, err)
	var got []string
	checkFields(f, func(pos token.Pos, format string, args ...any) {
		got = append(got, fmt.Sprintf("%d: %s", fset.Position(pos).Line, fmt.Sprintf(format, args...)))
	})
	assert.Equal(t, []string{"7: field T.D has no comment", "8: field T.E has no comment"}, got)
}

func TestHasRunnableExample(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      bool
	}{
		{"with output", "package p_test\nfunc ExampleF() {\n\t// Output: x\n}\n", true},
		{"with empty output", "package p_test\nfunc ExampleF() {\n\t// Output:\n}\n", true},
		{"compiled only", "package p_test\nfunc ExampleF() {}\n", false},
		{"no example", "package p_test\nfunc TestF() {}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "p_test.go", tc.src, parser.ParseComments)
			require.NoError(t, err)
			assert.Equal(t, tc.want, hasRunnableExample([]*ast.File{f}))
		})
	}
}
