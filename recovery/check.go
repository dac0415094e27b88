package recovery

import (
	"path"
	"strings"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// CheckConfig reports whether data is content Run keeps as the config file
// rel (relative to config/, slash-separated): a file named *.yaml or *.yml
// must parse as one YAML document, one named *.json as one JSON value
// (either way a *atomicfile.CorruptError naming rel), and then validate,
// if not nil, must accept it (its error is returned as it is). A file of
// any other name is checked by validate alone. Run quarantines a config
// file for which CheckConfig returns an error, with Options.Validate as
// validate; a program that writes config files checks them with it first
// to write nothing that the next start would call corrupt.
func CheckConfig(rel string, data []byte, validate func(path string, data []byte) error) error {
	var err error
	switch strings.ToLower(path.Ext(rel)) {
	case ".yaml", ".yml":
		err = atomicfile.ParseYAML(rel, data, nil)
	case ".json":
		err = atomicfile.ParseJSON(rel, data, nil)
	}
	if err == nil && validate != nil {
		err = validate(rel, data)
	}
	return err
}
