package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

// ErrCorrupt is matched by every *CorruptError.
var ErrCorrupt = errors.New("atomicfile: corrupt file")

// ErrEmpty is the Err of a *CorruptError for a file that holds no bytes.
// WriteFile never leaves an empty file, so an empty one was torn by
// something else.
var ErrEmpty = errors.New("file is empty")

// CorruptError reports a file whose bytes do not parse.
type CorruptError struct {
	Path string // the file
	Line int    // 1-based line of the first problem, 0 if unknown
	Err  error  // what the decoder said
}

// Error names the file and the line, and says how to repair it.
func (e *CorruptError) Error() string {
	where := e.Path
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	return where + ": corrupt: " + e.Err.Error() +
		" (fix the file by hand, restore it from a backup, or run `mcpkeep doctor --fix`)"
}

// Unwrap returns ErrCorrupt and the decoder's error.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// WriteYAML encodes v as YAML and replaces path with it like WriteFile.
func WriteYAML(path string, v any, perm fs.FileMode) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFile(path, buf.Bytes(), perm)
}

// WriteJSON encodes v as indented JSON with a final newline and replaces path
// with it like WriteFile.
func WriteJSON(path string, v any, perm fs.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFile(path, append(b, '\n'), perm)
}

// ReadYAML decodes the YAML file at path into v. A missing file gives an
// error matching fs.ErrNotExist; bytes that do not parse, or an empty file,
// give a *CorruptError. Unknown fields are ignored.
func ReadYAML(path string, v any) error { return readFile(path, v, decodeYAML, false) }

// ReadYAMLStrict is ReadYAML but an unknown field is a *CorruptError.
func ReadYAMLStrict(path string, v any) error { return readFile(path, v, decodeYAML, true) }

// ReadJSON decodes the JSON file at path into v, like ReadYAML.
func ReadJSON(path string, v any) error { return readFile(path, v, decodeJSON, false) }

// ReadJSONStrict is ReadJSON but an unknown field is a *CorruptError.
func ReadJSONStrict(path string, v any) error { return readFile(path, v, decodeJSON, true) }

// ParseYAML decodes data, read from path, into v; v may be nil to check the
// syntax only. Errors are *CorruptError naming path.
func ParseYAML(path string, data []byte, v any) error { return decodeYAML(path, data, v, false) }

// ParseJSON decodes data, read from path, into v; v may be nil to check the
// syntax only. Errors are *CorruptError naming path.
func ParseJSON(path string, data []byte, v any) error { return decodeJSON(path, data, v, false) }

type decodeFunc func(path string, data []byte, v any, strict bool) error

func readFile(path string, v any, decode decodeFunc, strict bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return decode(path, data, v, strict)
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func decodeYAML(path string, data []byte, v any, strict bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &CorruptError{Path: path, Err: ErrEmpty}
	}
	if v == nil {
		var n yaml.Node
		v = &n
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(strict)
	err := dec.Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	ce := &CorruptError{Path: path, Err: err}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		ce.Line, _ = strconv.Atoi(m[1])
	}
	return ce
}

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
			off := dec.InputOffset()
			return &CorruptError{Path: path, Line: lineAt(data, off), Err: errors.New("unexpected data after the JSON value")}
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
	return &CorruptError{Path: path, Line: lineAt(data, off), Err: err}
}

func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}
