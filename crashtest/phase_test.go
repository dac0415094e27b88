package crashtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPhaseValuesShowInDoc: go doc shows a constant's value as written, so
// each Phase constant is a string literal, not an expression that hides
// it, and the literals are the toolkit's phases, in order.
func TestPhaseValuesShowInDoc(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "failpoints.go", nil, 0)
	require.NoError(t, err)
	var values []Phase
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Phase" {
				continue
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !assert.True(t, ok && lit.Kind == token.STRING, "%s's value is not a string literal", name.Name) {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				values = append(values, Phase(v))
			}
		}
	}
	assert.Equal(t, Phases(), values)
}
