package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

// ErrCorrupt is matched by every *CorruptError.
var ErrCorrupt = errors.New("atomicfile: corrupt file")

// ErrEmpty is matched by the Err of a *CorruptError for a file that holds
// nothing to decode: no bytes, only white space or, in YAML, only comments.
// WriteFile never leaves an empty file, so an empty one was torn by
// something else.
var ErrEmpty = errors.New("file is empty")

var (
	// errOnlyComments is the Err of a YAML file of comments alone.
	errOnlyComments = fmt.Errorf("%w: it holds only comments, no YAML document", ErrEmpty)
	// errSecondDocument is the Err of a YAML file of two documents or more.
	errSecondDocument = errors.New("a second YAML document begins here (a file holds one)")
	// errStrayBOM is the Err of a YAML file that begins with a UTF-16 byte
	// order mark but whose text is not UTF-16.
	errStrayBOM = errors.New("it begins with a UTF-16 byte order mark (bytes FF FE or FE FF) but the text after it is not UTF-16; remove the first two bytes, or save the file as UTF-8")
)

// CorruptError reports a file whose bytes do not parse.
//
// Its message ends with what a person should do about the file: Remedy
// when the caller that knows what the file is for has set it (the config
// file of a home, say, which `mcpkeep doctor --fix` restores from git),
// else the generic advice to fix the file by hand or restore it from a
// backup. This package cannot know which files a tool repairs.
type CorruptError struct {
	Path string // the file, as the caller named it
	Line int    // 1-based line of the first problem, 0 if unknown
	Err  error  // what the decoder said; nil if nothing more is known

	// Excerpt is the start of line Line as the file has it, at most
	// MaxExcerpt bytes cut at a character boundary; "" when the line is
	// unknown or blank. A message that must not carry the file's bytes
	// (one for an MCP client) can show it in place of Err, whose text
	// quotes values of the file at any length.
	Excerpt string

	// Remedy says what to do about the file, as a lower-case phrase
	// ("restart the server: it restores the file from git"). Empty means
	// the generic advice to fix the file by hand or restore it from a
	// backup.
	Remedy string
}

// defaultRemedy is the remedy of a CorruptError whose Remedy is empty.
const defaultRemedy = "fix the file by hand or restore it from a backup"

// Error names the file and the line, says what is wrong with it, and what
// to do: Problem, then the remedy in parentheses.
func (e *CorruptError) Error() string {
	remedy := e.Remedy
	if remedy == "" {
		remedy = defaultRemedy
	}
	return e.Problem() + " (" + remedy + ")"
}

// Problem is Error without the remedy: the file, the line and what is
// wrong. A caller that is repairing the file already, and so has no advice
// to pass on, reports it with Problem.
func (e *CorruptError) Problem() string {
	where := e.Path
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	if e.Err == nil {
		return where + ": corrupt"
	}
	return where + ": corrupt: " + e.Err.Error()
}

// MaxExcerpt is the most bytes of a line a CorruptError's Excerpt holds.
const MaxExcerpt = 40

// Summary says what is wrong with the file in words of this package's
// own, quoting nothing of it: the decoders' messages quote the file's keys
// and values (a field not found, a value of the wrong type, a syntax error
// near a token), so Summary reduces them to their kind ("unknown field",
// "a list where another type is wanted", "not valid YAML: did not find
// expected key"). With Path, Line and Excerpt it makes a message for a
// reader who may see at most a line's start; Error keeps the decoder's
// full text for logs.
func (e *CorruptError) Summary() string { return summary(e.Err) }

// Unwrap returns ErrCorrupt and the decoder's error, if there is one.
func (e *CorruptError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.Err}
}

// WriteYAML encodes v as YAML and replaces path with it like WriteFile. It
// never writes a file that ReadYAML would refuse: YAML it encodes but
// cannot read back (a map with the keys 0 and 0.0, which yaml.v3 writes
// alike, as a duplicated key) is an error, and path is left as it was.
func WriteYAML(path string, v any, perm fs.FileMode) error {
	b, err := EncodeYAML(path, v)
	if err != nil {
		return err
	}
	return WriteFile(path, b, perm)
}

// WriteJSON encodes v as indented JSON with a final newline and replaces path
// with it like WriteFile.
func WriteJSON(path string, v any, perm fs.FileMode) error {
	b, err := EncodeJSON(path, v)
	if err != nil {
		return err
	}
	return WriteFile(path, b, perm)
}

// ReadYAML decodes the YAML file at path into v, which must be a non-nil
// pointer (anything else is the caller's mistake, reported as a plain
// error before the file is read). A missing file gives an error matching
// fs.ErrNotExist; a symbolic link (never followed), anything else that is
// not a regular file, or a file larger than DefaultMaxSize a *RefusedError
// (see Reader). Bytes that do not parse, a second document after the
// first, or nothing to decode (an empty file, or one of comments only,
// whose Err matches ErrEmpty) give a *CorruptError. Unknown fields are
// ignored.
func ReadYAML(path string, v any) error { return Reader{}.ReadYAML(path, v) }

// ReadYAMLStrict is ReadYAML but an unknown field is a *CorruptError.
func ReadYAMLStrict(path string, v any) error { return Reader{}.ReadYAMLStrict(path, v) }

// ReadJSON decodes the JSON file at path into v, like ReadYAML.
func ReadJSON(path string, v any) error { return Reader{}.ReadJSON(path, v) }

// ReadJSONStrict is ReadJSON but an unknown field is a *CorruptError.
func ReadJSONStrict(path string, v any) error { return Reader{}.ReadJSONStrict(path, v) }

// ReadYAML is the package's ReadYAML with r's limits.
func (r Reader) ReadYAML(path string, v any) error {
	return r.decodeFile("ReadYAML", path, v, decodeYAML, false)
}

// ReadYAMLStrict is the package's ReadYAMLStrict with r's limits.
func (r Reader) ReadYAMLStrict(path string, v any) error {
	return r.decodeFile("ReadYAMLStrict", path, v, decodeYAML, true)
}

// ReadJSON is the package's ReadJSON with r's limits.
func (r Reader) ReadJSON(path string, v any) error {
	return r.decodeFile("ReadJSON", path, v, decodeJSON, false)
}

// ReadJSONStrict is the package's ReadJSONStrict with r's limits.
func (r Reader) ReadJSONStrict(path string, v any) error {
	return r.decodeFile("ReadJSONStrict", path, v, decodeJSON, true)
}

// ParseYAML decodes data, read from path, into v; v may be nil to check the
// syntax only, and is otherwise a non-nil pointer, as for ReadYAML. Errors
// about data are *CorruptError naming path.
func ParseYAML(path string, data []byte, v any) error {
	if err := checkTarget("ParseYAML", path, v, true); err != nil {
		return err
	}
	return decodeYAML(path, data, v, false)
}

// ParseJSON decodes data, read from path, into v; v may be nil to check the
// syntax only, and is otherwise a non-nil pointer, as for ReadJSON. Errors
// about data are *CorruptError naming path.
func ParseJSON(path string, data []byte, v any) error {
	if err := checkTarget("ParseJSON", path, v, true); err != nil {
		return err
	}
	return decodeJSON(path, data, v, false)
}

type decodeFunc func(path string, data []byte, v any, strict bool) error

func (r Reader) decodeFile(fn, path string, v any, decode decodeFunc, strict bool) error {
	if err := checkTarget(fn, path, v, false); err != nil {
		return err
	}
	data, err := r.ReadFile(path)
	if err != nil {
		return err
	}
	return decode(path, data, v, strict)
}

// checkTarget returns an error when v is not something fn can decode into:
// a non-nil pointer, or nil when nilOK. That is a bug in the caller, not a
// corrupt file, so the error is a plain one that says so; without the
// check the YAML decoder panics and the JSON decoder's error would be
// reported as a corrupt file.
func checkTarget(fn, path string, v any, nilOK bool) error {
	if v == nil {
		if nilOK {
			return nil
		}
		return fmt.Errorf("atomicfile: %s(%q, nil): v must be a pointer to the value to decode into", fn, path)
	}
	switch rv := reflect.ValueOf(v); {
	case rv.Kind() != reflect.Pointer:
		return fmt.Errorf("atomicfile: %s(%q, %T): v is not a pointer; pass a pointer to the value to decode into, such as &cfg", fn, path, v)
	case rv.IsNil():
		return fmt.Errorf("atomicfile: %s(%q, %T(nil)): v is a nil pointer; pass a pointer to the value to decode into, such as &cfg", fn, path, v)
	}
	return nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func decodeYAML(path string, data []byte, v any, strict bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &CorruptError{Path: path, Err: ErrEmpty}
	}
	if strayBOM(data) {
		return corrupt(path, data, 1, errStrayBOM)
	}
	if bytes.IndexByte(data, '*') >= 0 { // no alias without a '*'
		if line := aliasBomb(data); line > 0 {
			return corrupt(path, data, line, errAliasBomb)
		}
	}
	if v == nil {
		var n yaml.Node
		v = &n
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(strict)
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		// Only comments: no document was decoded, as for an empty file.
		return &CorruptError{Path: path, Err: errOnlyComments}
	}
	if err != nil {
		return yamlError(path, data, err)
	}
	// One document per file: a second one, as JSON's trailing data, is a
	// doubled or torn write, or two files pasted into one.
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return yamlError(path, data, err)
	}
	return corrupt(path, data, next.Line, errSecondDocument)
}

// strayBOM reports whether data begins with a UTF-16 byte order mark that
// the text after it contradicts: yaml.v3 then decodes every two bytes of
// UTF-8 text as one character, and the whole file reads as one string
// that no mapping can hold, in characters the file never had. The
// contradiction is the missing zero bytes: UTF-16 text of YAML has the
// newlines, colons and spaces of its syntax, each with a zero byte, and a
// file that is one line of one scalar with no ASCII at all is no config.
// A mark before real UTF-16 text is fine: yaml.v3 reads it.
func strayBOM(data []byte) bool {
	if len(data) < 2 || !(data[0] == 0xff && data[1] == 0xfe || data[0] == 0xfe && data[1] == 0xff) {
		return false
	}
	return len(data) > 2 && bytes.IndexByte(data[2:], 0) < 0
}

// CheckUniqueKeys reports a mapping of the YAML document in data that gives
// a key twice, as a *CorruptError naming path with the words and line
// yaml.v3 gives when it decodes that mapping into a value (ReadYAML into a
// map, or into a struct for a field it has, refuses such a file). It
// returns nil when every mapping gives each key once, and ParseYAML's
// error when data does not parse. ParseYAML's own check of the syntax does
// not refuse a key given twice: yaml.v3 refuses it only in the mappings a
// read decodes, so a struct read that skips the mapping accepts the file.
// Keys are compared as yaml.v3 compares them, by kind and value, in time
// linear in the keys (yaml.v3's own check is quadratic).
func CheckUniqueKeys(path string, data []byte) error {
	var n yaml.Node
	if err := ParseYAML(path, data, &n); err != nil {
		return err
	}
	if err := keyTwice(&n); err != nil {
		return yamlError(path, data, err)
	}
	return nil
}

// keyTwice returns the error yaml.v3 gives first for the mappings under n
// that give a key twice (a *yaml.TypeError with its words), or nil: the
// first such mapping in document order, and in it the pair yaml.v3 meets
// first (the earliest key that has a double, with its first double).
func keyTwice(n *yaml.Node) error {
	type key struct {
		kind  yaml.Kind
		value string
	}
	var first map[key]int // a key's first index in the mapping
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n.Kind == yaml.MappingNode && len(n.Content) > 2 {
			clear(first)
			if first == nil {
				first = make(map[key]int, len(n.Content)/2)
			}
			bi, bj := -1, -1
			for j := 0; j+1 < len(n.Content); j += 2 {
				k := key{n.Content[j].Kind, n.Content[j].Value}
				i, seen := first[k]
				if !seen {
					first[k] = j
					continue
				}
				if bi < 0 || i < bi {
					bi, bj = i, j
				}
			}
			if bi >= 0 {
				ki, kj := n.Content[bi], n.Content[bj]
				return &yaml.TypeError{Errors: []string{
					fmt.Sprintf("line %d: mapping key %#v already defined at line %d", kj.Line, kj.Value, ki.Line)}}
			}
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(n)
}

// corrupt is the *CorruptError for line of data, with its excerpt.
func corrupt(path string, data []byte, line int, err error) *CorruptError {
	return &CorruptError{Path: path, Line: line, Err: err, Excerpt: excerpt(data, line)}
}

// yamlError is the *CorruptError for an error of the YAML decoder, with
// the line it names.
func yamlError(path string, data []byte, err error) *CorruptError {
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	return corrupt(path, data, line, err)
}

// errJSONTrailing is the Err of a JSON file with bytes after its value.
var errJSONTrailing = errors.New("unexpected data after the JSON value")

func decodeJSON(path string, data []byte, v any, strict bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &CorruptError{Path: path, Err: ErrEmpty}
	}
	if v == nil {
		var raw json.RawMessage
		v = &raw
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err == nil {
		// One value per file: trailing bytes are a torn or doubled write.
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			return corrupt(path, data, lineAt(data, dec.InputOffset()), errJSONTrailing)
		}
		return nil
	}
	off := dec.InputOffset()
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the offending byte is the last one read
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(data))
	}
	return corrupt(path, data, lineAt(data, off), err)
}

func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}
