package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// EncodeYAML returns v encoded as WriteYAML writes it (two-space indent),
// for a caller that writes the bytes itself (lifecycle.Tx). It never
// returns YAML that ReadYAML would refuse; path only names the file in
// errors.
func EncodeYAML(path string, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode %s: %w", path, err)
	}
	var check any
	if err := decodeYAML(path, buf.Bytes(), &check, false); err != nil {
		problem := err.Error()
		var ce *CorruptError
		if errors.As(err, &ce) && ce.Err != nil {
			problem = ce.Err.Error()
		}
		return nil, fmt.Errorf("encode %s: the YAML would not read back (%s); nothing was written: "+
			"give map keys that YAML writes apart (such as 0 and 0.0, both written 0)", path, problem)
	}
	return buf.Bytes(), nil
}

// EncodeJSON returns v encoded as WriteJSON writes it: indented, with a
// final newline. path only names the file in errors.
func EncodeJSON(path string, v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", path, err)
	}
	return append(b, '\n'), nil
}

// ParseYAMLStrict is ParseYAML, but an unknown field is a *CorruptError,
// as for ReadYAMLStrict.
func ParseYAMLStrict(path string, data []byte, v any) error {
	if err := checkTarget("ParseYAMLStrict", path, v, true); err != nil {
		return err
	}
	return decodeYAML(path, data, v, true)
}

// ParseJSONStrict is ParseJSON, but an unknown field is a *CorruptError,
// as for ReadJSONStrict.
func ParseJSONStrict(path string, data []byte, v any) error {
	if err := checkTarget("ParseJSONStrict", path, v, true); err != nil {
		return err
	}
	return decodeJSON(path, data, v, true)
}
