package atomicfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// EncodeYAML returns v encoded as WriteYAML writes it (two-space indent),
// for a caller that writes the bytes itself (lifecycle.Tx). It never
// returns YAML that ReadYAML would refuse; path only names the file in
// errors.
func EncodeYAML(path string, v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeYAML(&buf, v); err != nil {
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

// encodeYAML writes v to buf with a two-space indent. yaml.v3 panics,
// rather than failing, on a value it cannot encode (a func, a channel, a
// complex number): that panic is returned as an error saying what to
// give instead; any other panic continues.
func encodeYAML(buf *bytes.Buffer, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, ok := r.(string)
			if !ok || !strings.HasPrefix(msg, "cannot marshal type: ") {
				panic(r)
			}
			err = fmt.Errorf("%s: YAML holds maps, lists, strings, numbers and booleans; "+
				"give a value made of those (a struct's func or channel fields need `yaml:\"-\"`)", msg)
		}
	}()
	enc := yaml.NewEncoder(buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
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
