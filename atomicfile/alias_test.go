package atomicfile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// billionLaughs is the classic alias bomb: nine lists of nine aliases to
// the list before, 9^9 strings from a few hundred bytes.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 9; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(p+", ", 8)+p)
	}
	return b.String()
}

// wideBomb aliases one mapping of n keys m times over: no nesting, so
// yaml.v3's ratio of aliased to decoded values lets it decode some 400,000
// values before it stops.
func wideBomb(n, m int) string {
	var b strings.Builder
	b.WriteString("a: &a {")
	for i := range n {
		fmt.Fprintf(&b, "k%d: v, ", i)
	}
	b.WriteString("z: v}\nb: [")
	b.WriteString(strings.Repeat("*a, ", m) + "*a]\n")
	return b.String()
}

// allocDuring returns the bytes fn allocates.
func allocDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestAliasBombRefused: an alias bomb far under the size limit is a
// *CorruptError that says so, from every YAML read and parse, before it is
// decoded: the bytes allocated stay a small multiple of the file's size.
// The memory bound is the test; BenchmarkAliasBomb says how long it takes.
func TestAliasBombRefused(t *testing.T) {
	for name, data := range map[string]string{
		"billion laughs": billionLaughs(),
		"wide":           wideBomb(1000, 200),
		"two levels":     "a: &a {k: v, x: y}\nb: &b [" + strings.Repeat("*a, ", 400) + "*a]\nc: [" + strings.Repeat("*b, ", 400) + "*b]\n",
	} {
		t.Run(name, func(t *testing.T) {
			require.Less(t, len(data), int(atomicfile.DefaultMaxSize))
			path := filepath.Join(t.TempDir(), "bomb.yaml")
			require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
			for fn, read := range map[string]func() error{
				"ReadYAML any":          func() error { var v any; return atomicfile.ReadYAML(path, &v) },
				"ReadYAMLStrict struct": func() error { var v struct{ A, B, C []any }; return atomicfile.ReadYAMLStrict(path, &v) },
				"ParseYAML nil":         func() error { return atomicfile.ParseYAML(path, []byte(data), nil) },
			} {
				var err error
				alloc := allocDuring(func() { err = read() })
				var ce *atomicfile.CorruptError
				require.ErrorAs(t, err, &ce, fn)
				assert.Contains(t, ce.Summary(), "alias bomb", fn)
				assert.Positive(t, ce.Line, fn)
				assert.Less(t, alloc, uint64(8<<20), "%s allocated %d bytes for a %d-byte file", fn, alloc, len(data))
			}
		})
	}
}

// TestAliasesThatFitAreRead: anchors and aliases as config uses them, merge
// keys included, up to MaxAliasValues values added, read as before.
func TestAliasesThatFitAreRead(t *testing.T) {
	data := "defaults: &d {tone: warm, length: short}\n" +
		"a: {<<: *d, name: a}\nb: {<<: *d, name: b}\nlist: [" +
		strings.Repeat("*d, ", atomicfile.MaxAliasValues/5-3) + "*d]\n"
	path := filepath.Join(t.TempDir(), "ok.yaml")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	var v struct {
		A    map[string]string   `yaml:"a"`
		List []map[string]string `yaml:"list"`
	}
	require.NoError(t, atomicfile.ReadYAML(path, &v))
	assert.Equal(t, map[string]string{"tone": "warm", "length": "short", "name": "a"}, v.A)
	assert.Len(t, v.List, atomicfile.MaxAliasValues/5-2)

	more := strings.Replace(data, "*d]", "*d, *d]", 1)
	require.NoError(t, os.WriteFile(path, []byte(more), 0o600))
	require.ErrorIs(t, atomicfile.ReadYAML(path, &v), atomicfile.ErrCorrupt, "one alias more is past the limit")
}

// TestAliasCycleIsCorrupt: an anchor whose value aliases itself is corrupt,
// not an endless count.
func TestAliasCycleIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cycle.yaml")
	require.NoError(t, os.WriteFile(path, []byte("a: &a [x, *a]\n"), 0o600))
	var v any
	var ce *atomicfile.CorruptError
	require.ErrorAs(t, atomicfile.ReadYAML(path, &v), &ce)
	assert.Equal(t, "an anchor whose value contains an alias to itself", ce.Summary())
}

// BenchmarkAliasBomb: how long refusing the bombs of TestAliasBombRefused
// takes.
func BenchmarkAliasBomb(b *testing.B) {
	for name, data := range map[string][]byte{"billion-laughs": []byte(billionLaughs()), "wide": []byte(wideBomb(1000, 200))} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var v any
				if err := atomicfile.ParseYAML("bomb.yaml", data, &v); err == nil {
					b.Fatal("the bomb was decoded")
				}
			}
		})
	}
}
