package atomicfile_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

type doc struct {
	Name          string `yaml:"name" json:"name"`
	ActivePersona string `yaml:"active_persona,omitempty" json:"active_persona,omitempty"`
	N             int    `yaml:"n,omitempty" json:"n,omitempty"`
}

func fixture(kind, name string) string { return filepath.Join("..", "testdata", kind, name) }

func TestReadYAMLFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		line int // 0: corrupt with any line; -1: valid
	}{
		{"valid.yaml", -1},
		{"tab-indent.yaml", 2},
		{"unclosed-quote.yaml", 0},
		{"truncated.yaml", 0},
		{"unclosed-flow.yaml", 0},
		{"garbage.bin", 0},
		{"two-documents.yaml", 3},
		{"comments-only.yaml", 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var d doc
			err := atomicfile.ReadYAML(fixture("yaml", tc.file), &d)
			if tc.line < 0 {
				require.NoError(t, err)
				assert.Equal(t, "helios", d.Name)
				return
			}
			var ce *atomicfile.CorruptError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, atomicfile.ErrCorrupt)
			assert.Equal(t, fixture("yaml", tc.file), ce.Path)
			if tc.line > 0 {
				assert.Equal(t, tc.line, ce.Line)
			}
			assert.Contains(t, err.Error(), tc.file, "the error names the file")
			assert.Contains(t, err.Error(), "(fix the file by hand or restore it from a backup)", "and says what to do")
			assert.NotContains(t, err.Error(), "doctor", "a tool this package cannot know repairs the file")
		})
	}
}

func TestReadJSONFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		line int
	}{
		{"valid.json", -1},
		{"torn.json", 1},
		{"doubled.json", 2},
		{"bad-literal.json", 3},
		{"garbage.bin", 1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var d doc
			err := atomicfile.ReadJSON(fixture("json", tc.file), &d)
			if tc.line < 0 {
				require.NoError(t, err)
				assert.Equal(t, "helios", d.Name)
				return
			}
			var ce *atomicfile.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.line, ce.Line)
		})
	}
}

func TestReadMissingAndEmpty(t *testing.T) {
	dir := t.TempDir()
	var d doc
	require.ErrorIs(t, atomicfile.ReadYAML(filepath.Join(dir, "none.yaml"), &d), os.ErrNotExist)
	require.ErrorIs(t, atomicfile.ReadJSON(filepath.Join(dir, "none.json"), &d), os.ErrNotExist)
	empty := filepath.Join(dir, "empty.yaml")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	err := atomicfile.ReadYAML(empty, &d)
	require.ErrorIs(t, err, atomicfile.ErrCorrupt)
	require.ErrorIs(t, err, atomicfile.ErrEmpty)
}

// TestYAMLHoldsOneDocument: a YAML file holds one document, as a JSON file
// holds one value: a second is corrupt (a doubled or pasted write), and a
// file of comments alone is as empty as a file of nothing.
func TestYAMLHoldsOneDocument(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		line       int  // of the problem; -1: valid
		empty      bool // matches ErrEmpty
	}{
		{name: "one", data: "name: a\n", line: -1},
		{name: "start marker", data: "---\nname: a\n", line: -1},
		{name: "end marker", data: "name: a\n...\n", line: -1},
		{name: "comments around", data: "# c\nname: a # d\n# e\n", line: -1},
		{name: "two", data: "name: a\n---\nname: b\n", line: 2},
		{name: "two after blank lines", data: "name: a\n\n\n--- b\n", line: 4},
		{name: "an empty second", data: "name: a\n---\n", line: 2},
		{name: "a broken second", data: "name: a\n---\nname: [\n", line: 3},
		{name: "three", data: "name: a\n---\nname: b\n---\nname: c\n", line: 2},
		{name: "only comments", data: "# name: a\n\n  # more\n", empty: true},
		{name: "only white space", data: " \n\t\n", empty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			for fn, read := range map[string]func() error{
				"ReadYAML":       func() error { var d doc; return atomicfile.ReadYAML(path, &d) },
				"ReadYAMLStrict": func() error { var d doc; return atomicfile.ReadYAMLStrict(path, &d) },
				"ParseYAML nil":  func() error { return atomicfile.ParseYAML(path, []byte(tc.data), nil) },
			} {
				err := read()
				if tc.line < 0 && !tc.empty {
					assert.NoError(t, err, fn)
					continue
				}
				var ce *atomicfile.CorruptError
				if !assert.ErrorAs(t, err, &ce, fn) {
					continue
				}
				assert.Equal(t, path, ce.Path, fn)
				if tc.empty {
					assert.ErrorIs(t, err, atomicfile.ErrEmpty, fn)
					continue
				}
				assert.NotErrorIs(t, err, atomicfile.ErrEmpty, fn)
				assert.Equal(t, tc.line, ce.Line, fn)
			}
		})
	}
}

// TestDecodeTargetMustBeAPointer: a v that cannot be decoded into is the
// caller's bug: a plain error that says so, never a panic, and never a
// *CorruptError blaming the file and suggesting repairs.
func TestDecodeTargetMustBeAPointer(t *testing.T) {
	dir := t.TempDir()
	y := filepath.Join(dir, "a.yaml")
	require.NoError(t, os.WriteFile(y, []byte("name: x\n"), 0o600))
	j := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(j, []byte(`{"name":"x"}`), 0o600))
	funcs := []struct {
		name  string
		nilOK bool // nil checks the syntax only
		call  func(v any) error
	}{
		{"ReadYAML", false, func(v any) error { return atomicfile.ReadYAML(y, v) }},
		{"ReadYAMLStrict", false, func(v any) error { return atomicfile.ReadYAMLStrict(y, v) }},
		{"ReadJSON", false, func(v any) error { return atomicfile.ReadJSON(j, v) }},
		{"ReadJSONStrict", false, func(v any) error { return atomicfile.ReadJSONStrict(j, v) }},
		{"ParseYAML", true, func(v any) error { return atomicfile.ParseYAML(y, []byte("name: x\n"), v) }},
		{"ParseJSON", true, func(v any) error { return atomicfile.ParseJSON(j, []byte(`{"name":"x"}`), v) }},
		{"ReadYAML of a missing file", false, func(v any) error { return atomicfile.ReadYAML(filepath.Join(dir, "none"), v) }},
	}
	targets := []struct {
		name string
		v    any
		says string
	}{
		{"struct", doc{}, "not a pointer"},
		{"map", map[string]any{}, "not a pointer"},
		{"nil pointer", (*doc)(nil), "nil pointer"},
		{"nil", nil, "must be a pointer"},
	}
	for _, f := range funcs {
		for _, tg := range targets {
			t.Run(f.name+"/"+tg.name, func(t *testing.T) {
				var err error
				require.NotPanics(t, func() { err = f.call(tg.v) })
				if tg.v == nil && f.nilOK {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				assert.NotErrorIs(t, err, atomicfile.ErrCorrupt, "the file is fine")
				assert.NotErrorIs(t, err, os.ErrNotExist, "the argument is checked first")
				assert.Contains(t, err.Error(), tg.says)
			})
		}
	}
	var d doc
	require.NoError(t, atomicfile.ReadYAML(y, &d), "a pointer is fine")
	assert.Equal(t, "x", d.Name)
}

// TestCorruptErrorRemedy: the caller that knows what a file is for says
// what to do about it; otherwise the advice is generic. Problem leaves it
// out, for a caller repairing the file already.
func TestCorruptErrorRemedy(t *testing.T) {
	cause := errors.New("yaml: did not find expected key")
	for _, tc := range []struct {
		name    string
		err     *atomicfile.CorruptError
		problem string
		remedy  string
	}{
		{"generic", &atomicfile.CorruptError{Path: "a.yaml", Line: 3, Err: cause},
			"a.yaml:3: corrupt: yaml: did not find expected key", "fix the file by hand or restore it from a backup"},
		{"the caller's", &atomicfile.CorruptError{Path: "a.yaml", Err: cause, Remedy: "restart the server"},
			"a.yaml: corrupt: yaml: did not find expected key", "restart the server"},
		{"no Err", &atomicfile.CorruptError{Path: "a.yaml", Remedy: "restart the server"},
			"a.yaml: corrupt", "restart the server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.problem, tc.err.Problem())
			assert.Equal(t, tc.problem+" ("+tc.remedy+")", tc.err.Error())
		})
	}
}

// TestCorruptErrorWithoutErr: a CorruptError built without an Err, as a
// caller may, still prints and matches ErrCorrupt.
func TestCorruptErrorWithoutErr(t *testing.T) {
	for _, ce := range []*atomicfile.CorruptError{{Path: "p"}, {Path: "p", Line: 3}} {
		var msg string
		require.NotPanics(t, func() { msg = ce.Error() })
		assert.Contains(t, msg, "p")
		assert.Contains(t, msg, "corrupt")
		assert.NotContains(t, msg, "<nil>")
		require.ErrorIs(t, ce, atomicfile.ErrCorrupt)
		var got *atomicfile.CorruptError
		require.ErrorAs(t, fmt.Errorf("wrapped: %w", ce), &got)
		assert.Same(t, ce, got)
	}
}

func TestStrictRejectsUnknownFields(t *testing.T) {
	dir := t.TempDir()
	y := filepath.Join(dir, "a.yaml")
	require.NoError(t, os.WriteFile(y, []byte("name: x\nsurprise: 1\n"), 0o600))
	var d doc
	require.NoError(t, atomicfile.ReadYAML(y, &d))
	require.ErrorIs(t, atomicfile.ReadYAMLStrict(y, &d), atomicfile.ErrCorrupt)
	j := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(j, []byte(`{"name":"x","surprise":1}`), 0o600))
	require.NoError(t, atomicfile.ReadJSON(j, &d))
	require.ErrorIs(t, atomicfile.ReadJSONStrict(j, &d), atomicfile.ErrCorrupt)
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := doc{Name: "helios", ActivePersona: "default", N: 3}
	var out doc
	require.NoError(t, atomicfile.WriteYAML(filepath.Join(dir, "a.yaml"), in, 0))
	require.NoError(t, atomicfile.ReadYAMLStrict(filepath.Join(dir, "a.yaml"), &out))
	assert.Equal(t, in, out)
	out = doc{}
	require.NoError(t, atomicfile.WriteJSON(filepath.Join(dir, "a.json"), in, 0))
	require.NoError(t, atomicfile.ReadJSONStrict(filepath.Join(dir, "a.json"), &out))
	assert.Equal(t, in, out)
	assert.Error(t, atomicfile.WriteJSON(filepath.Join(dir, "bad.json"), make(chan int), 0), "unencodable")
}

// TestWriteYAMLNeverWritesWhatItCannotRead: a map with the keys 0 and 0.0
// encodes as two keys "0", which ReadYAML refuses as a duplicate (found by
// FuzzReadYAML, input "0: \n0.0:"). WriteYAML says so and leaves the file
// as it was.
func TestWriteYAMLNeverWritesWhatItCannotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	require.NoError(t, os.WriteFile(path, []byte("old: bytes\n"), 0o600))
	err := atomicfile.WriteYAML(path, map[any]any{0: nil, 0.0: nil}, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "would not read back")
	assert.Contains(t, err.Error(), "already defined")
	data, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	assert.Equal(t, "old: bytes\n", string(data), "nothing was written")
	entries, rerr := os.ReadDir(filepath.Dir(path))
	require.NoError(t, rerr)
	assert.Len(t, entries, 1, "and no temporary file left")
}

// TestCheckUniqueKeys: CheckUniqueKeys refuses a mapping that gives a key
// twice, at any depth, with the words and line a read into a value gives
// first; one that gives each key once passes, and so does the syntax check
// (ParseYAML with a nil target) of either.
func TestCheckUniqueKeys(t *testing.T) {
	for _, c := range []struct {
		name, data string
		line       int // of the second key; 0: accepted
	}{
		{"top", "a: 1\nb: 2\na: 3\n", 3},
		{"nested", "a:\n  x: 1\n  x: 2\n", 3},
		{"in a list", "- a: 1\n- b: 1\n  b: 2\n", 3},
		{"flow", "{a: 1, a: 2}\n", 1},
		{"quoted and plain", "1: a\n\"1\": b\n", 2},
		{"two pairs, the outer first", "a: 1\nb: 2\nb: 3\na: 4\n", 4},
		{"a key per mapping", "a:\n  x: 1\nb:\n  x: 1\n", 0},
		{"same value, other kind", "a: 1\n? [a]\n: 2\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, atomicfile.ParseYAML("n.yaml", []byte(c.data), nil), "the syntax check")
			err := atomicfile.CheckUniqueKeys("n.yaml", []byte(c.data))
			var v any
			rerr := atomicfile.ParseYAML("n.yaml", []byte(c.data), &v)
			if c.line == 0 {
				require.NoError(t, err)
				return
			}
			var ce, rce *atomicfile.CorruptError
			require.ErrorAs(t, err, &ce)
			require.ErrorAs(t, rerr, &rce, "a read into a value refuses it too")
			assert.True(t, strings.HasPrefix(rce.Summary(), ce.Summary()), "%q, %q", ce.Summary(), rce.Summary())
			assert.Equal(t, c.line, ce.Line)
			assert.Equal(t, rce.Line, ce.Line)
		})
	}
}

func seeds(f *testing.F, kind string) {
	entries, err := os.ReadDir(filepath.Join("..", "testdata", kind))
	require.NoError(f, err)
	for _, e := range entries {
		b, err := os.ReadFile(fixture(kind, e.Name()))
		require.NoError(f, err)
		f.Add(b)
	}
}

func FuzzReadYAML(f *testing.F) {
	seeds(f, "yaml")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "f.yaml")
		require.NoError(t, os.WriteFile(p, data, 0o600))
		var v any
		if err := atomicfile.ReadYAML(p, &v); err != nil {
			var ce *atomicfile.CorruptError
			if errors.As(err, &ce) && strings.HasPrefix(ce.Summary(), "a key given twice") {
				// A transaction's check refuses what a read into a
				// map refuses.
				assert.Error(t, atomicfile.CheckUniqueKeys(p, data), "a key given twice passed CheckUniqueKeys")
			}
			return
		}
		require.NoError(t, atomicfile.ParseYAML(p, data, nil), "what a read accepts, the syntax check accepts")
		require.NoError(t, atomicfile.CheckUniqueKeys(p, data), "what a read accepts, CheckUniqueKeys accepts")
		// What parses writes back and reads again.
		out := filepath.Join(dir, "out.yaml")
		if err := atomicfile.WriteYAML(out, v, 0); err != nil {
			return // e.g. a map key YAML cannot re-encode
		}
		var again any
		require.NoError(t, atomicfile.ReadYAML(out, &again))
	})
}

func FuzzReadJSON(f *testing.F) {
	seeds(f, "json")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "f.json")
		require.NoError(t, os.WriteFile(p, data, 0o600))
		var v any
		if err := atomicfile.ReadJSON(p, &v); err != nil {
			return
		}
		out := filepath.Join(dir, "out.json")
		require.NoError(t, atomicfile.WriteJSON(out, v, 0))
		var again any
		require.NoError(t, atomicfile.ReadJSON(out, &again))
		assert.Equal(t, v, again)
	})
}

// TestWriteYAMLRefusesWhatYAMLCannotHold: a func or a channel is an error
// naming the type and what to give instead (yaml.v3 panics on them), and
// nothing is written.
func TestWriteYAMLRefusesWhatYAMLCannotHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	for _, v := range []any{
		func() {},
		map[string]any{"ch": make(chan int)},
		struct{ F func() }{},
	} {
		err := atomicfile.WriteYAML(path, v, 0o600)
		require.Error(t, err, "%T", v)
		assert.Contains(t, err.Error(), "cannot marshal type")
		assert.Contains(t, err.Error(), "give a value made of those")
		assert.NoFileExists(t, path)
		_, err = atomicfile.EncodeYAML(path, v)
		assert.ErrorContains(t, err, "encode "+path+": cannot marshal type")
	}
}

// TestYAMLByteOrderMark: a file saved as UTF-16 with its byte order mark
// reads as the same config as UTF-8; a UTF-16 mark before UTF-8 text (an
// editor's or a tool's slip) is corrupt with words that say so, not a
// mapping read as one string of characters the file never had.
func TestYAMLByteOrderMark(t *testing.T) {
	const text = "name: hello\n"
	encode16 := func(order binary.AppendByteOrder, mark []byte) string {
		b := mark
		for _, c := range utf16.Encode([]rune(text)) {
			b = order.AppendUint16(b, c)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, data string
		stray      bool
	}{
		{"UTF-8 with its mark", "\xef\xbb\xbf" + text, false},
		{"UTF-16LE", encode16(binary.LittleEndian, []byte{0xff, 0xfe}), false},
		{"UTF-16BE", encode16(binary.BigEndian, []byte{0xfe, 0xff}), false},
		{"a UTF-16LE mark before UTF-8", "\xff\xfe" + text, true},
		{"a UTF-16BE mark before UTF-8", "\xfe\xff" + text, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			var d doc
			err := atomicfile.ReadYAML(path, &d)
			perr := atomicfile.ParseYAML(path, []byte(tc.data), nil)
			if !tc.stray {
				require.NoError(t, err)
				require.NoError(t, perr)
				assert.Equal(t, "hello", d.Name)
				return
			}
			for _, err := range []error{err, perr} {
				var ce *atomicfile.CorruptError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, path, ce.Path)
				assert.Equal(t, 1, ce.Line)
				assert.Contains(t, ce.Summary(), "UTF-16 byte order mark")
				assert.Contains(t, err.Error(), "save the file as UTF-8")
			}
		})
	}
}
