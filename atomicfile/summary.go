package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// excerpt returns the start of line n (1-based) of data, at most
// MaxExcerpt bytes, cut at a character boundary, with trailing white space
// and a carriage return removed; "" when there is no such line.
func excerpt(data []byte, n int) string {
	if n <= 0 {
		return ""
	}
	for i := 1; i < n; i++ {
		nl := strings.IndexByte(string(data), '\n')
		if nl < 0 {
			return ""
		}
		data = data[nl+1:]
	}
	if nl := strings.IndexByte(string(data), '\n'); nl >= 0 {
		data = data[:nl]
	}
	cut := len(data) > MaxExcerpt
	if cut {
		data = data[:MaxExcerpt]
		// Back off to a character boundary (a byte that is not a
		// continuation byte), at most three bytes.
		for i := 0; i < utf8.UTFMax-1 && len(data) > 0 && !utf8.Valid(data); i++ {
			data = data[:len(data)-1]
		}
	}
	return strings.TrimRight(string(data), " \t\r")
}

// Patterns of yaml.v3's messages that quote the file, and what Summary
// says instead: the quoted parts are keys, values, anchors and tags of the
// file, at any length.
var (
	yamlUnknownField = regexp.MustCompile(`^line \d+: field .* not found in type `)
	yamlFieldTwice   = regexp.MustCompile(`^line \d+: field .* already set in type `)
	yamlKeyTwice     = regexp.MustCompile(`^line \d+: mapping key .* already defined at line (\d+)$`)
	yamlWrongType    = regexp.MustCompile(`^line \d+: cannot unmarshal !!([a-z]+)[ ]`)
	yamlPrefix       = regexp.MustCompile(`^yaml: (line \d+: )?`)
	// yamlPlain matches the syntax messages of yaml.v3's scanner and parser
	// ("did not find expected key", "found character that cannot start any
	// token"): fixed words, which may be passed on as they are.
	yamlPlain = regexp.MustCompile(`^[a-zA-Z ,()'-]{1,80}$`)
)

// yamlKinds names YAML's core tags in words.
var yamlKinds = map[string]string{
	"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean",
	"null": "null", "map": "a mapping", "seq": "a list", "timestamp": "a time", "binary": "binary data",
}

// summary is CorruptError.Summary for the decoder error err.
func summary(err error) string {
	var (
		te *yaml.TypeError
		se *json.SyntaxError
		ue *json.UnmarshalTypeError
	)
	switch {
	case err == nil:
		return "corrupt"
	case errors.Is(err, ErrEmpty), errors.Is(err, errSecondDocument), errors.Is(err, errJSONTrailing), errors.Is(err, errAliasBomb), errors.Is(err, errStrayBOM):
		return err.Error() // this package's own words
	case errors.As(err, &te):
		if len(te.Errors) == 0 {
			return "a value that does not fit"
		}
		s := yamlTypeProblem(te.Errors[0])
		if n := len(te.Errors) - 1; n > 0 {
			s += fmt.Sprintf(" (and %d more problem(s))", n)
		}
		return s
	case errors.As(err, &se):
		return "not valid JSON"
	case errors.As(err, &ue):
		if ue.Value != "" && yamlPlain.MatchString(ue.Value) {
			return "a value of the wrong type (" + ue.Value + ")"
		}
		return "a value of the wrong type"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the file ends in the middle of a value"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field"
	case strings.HasPrefix(err.Error(), "yaml: "):
		msg := yamlPrefix.ReplaceAllString(err.Error(), "")
		switch {
		case strings.Contains(msg, "excessive aliasing"):
			return "too many aliases: the file expands to far more than it holds (an alias bomb?)"
		case strings.HasPrefix(msg, "unknown anchor "):
			return "an alias to an anchor not defined before it"
		case strings.Contains(msg, " value contains itself"):
			return "an anchor whose value contains an alias to itself"
		case strings.HasPrefix(msg, "invalid map key"):
			return "a mapping key that is not a plain value"
		case yamlPlain.MatchString(msg):
			return "not valid YAML: " + msg
		}
		return "not valid YAML"
	}
	return "not valid"
}

// yamlTypeProblem is the summary of one of a yaml.TypeError's messages.
func yamlTypeProblem(msg string) string {
	switch {
	case yamlUnknownField.MatchString(msg):
		return "unknown field"
	case yamlFieldTwice.MatchString(msg):
		return "a field given twice"
	case yamlKeyTwice.MatchString(msg):
		return "a key given twice (first at line " + yamlKeyTwice.FindStringSubmatch(msg)[1] + ")"
	case yamlWrongType.MatchString(msg):
		if kind, ok := yamlKinds[yamlWrongType.FindStringSubmatch(msg)[1]]; ok {
			return kind + " where another type is wanted"
		}
		return "a value of the wrong type"
	}
	return "a value that does not fit"
}
