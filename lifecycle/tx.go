package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/gitstore"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// ErrBadPath is matched by every *PathError: a path a Tx method refused.
// It is lifecycle.ErrBadPath, not gitstore.ErrBadPath, which a *PathError
// does not match.
var ErrBadPath = errors.New("lifecycle: bad config path")

// PathError reports a path a transaction refused. Nothing was written:
// a transaction checks each path when it is named.
type PathError struct {
	Op     string // the Tx method, such as "WriteFile"
	Path   string // the path as the caller gave it
	Reason string // what is wrong with it and what to give instead
}

// Error names the call, the path and what to do.
func (e *PathError) Error() string {
	return fmt.Sprintf("lifecycle: tx.%s(%q): %s", e.Op, e.Path, e.Reason)
}

// Unwrap returns lifecycle.ErrBadPath.
func (e *PathError) Unwrap() error { return ErrBadPath }

// Tx is the transaction of one Env.Update: the function given to Update
// reads and writes config files through it, by paths relative to
// ConfigDir (slash-separated, as "personas/default.yaml"). Nothing reaches
// the disk while the function runs; when it returns nil, Update commits
// exactly the files it wrote and removed, with Update's message, and makes
// the change durable. A read sees the transaction's own writes, then
// those of transactions before it, then the files on disk. A Tx is for
// the function it was given to, in that goroutine: after the function
// returns, every method returns an error.
type Tx struct {
	env    *Env
	writes map[string]*txWrite
	closed bool
}

// txWrite is one staged file: its bytes, or its removal.
type txWrite struct {
	data    []byte
	removed bool
}

// ReadFile returns the bytes of the config file at p. A missing file (or
// one the transaction removed) gives an error matching fs.ErrNotExist.
func (tx *Tx) ReadFile(p string) ([]byte, error) {
	return tx.read("ReadFile", p)
}

// read is ReadFile, its errors naming the Tx method op.
func (tx *Tx) read(op, p string) ([]byte, error) {
	rel, err := tx.check(op, p)
	if err != nil {
		return nil, err
	}
	if w, ok := tx.writes[rel]; ok {
		if w.removed {
			return nil, &fs.PathError{Op: "read", Path: tx.env.abs(rel), Err: fs.ErrNotExist}
		}
		return slices.Clone(w.data), nil
	}
	if data, removed, ok := tx.env.staged(rel); ok {
		if removed {
			return nil, &fs.PathError{Op: "read", Path: tx.env.abs(rel), Err: fs.ErrNotExist}
		}
		return slices.Clone(data), nil
	}
	if tx.linkOn(rel) == "" { // through a link, the reader refuses it, naming the link
		if fi, err := os.Lstat(tx.env.abs(rel)); err == nil && fi.IsDir() {
			return nil, &PathError{Op: op, Path: p, Reason: "it is a directory; name a file in it (tx.List lists them)"}
		}
	}
	// As Env.Reader reads: no link followed below ConfigDir, regular
	// files only, at most MaxFileSize bytes.
	return tx.env.Reader().ReadFile(tx.env.abs(rel))
}

// WriteFile stages data as the new bytes of the config file at p,
// creating it and its directories if need be. A new file gets mode 0600,
// an existing one keeps its mode. Data larger than Env.MaxFileSize is
// refused (an error matching atomicfile.ErrTooLarge): no reader would
// read it back. So is data the next start's recovery would quarantine as
// corrupt (recovery.CheckConfig): for a path named *.yaml, *.yml or
// *.json, data that does not parse as such, and for any path, data that
// Env.Validate (Options.Validate) refuses. So is YAML with a mapping that
// gives a key twice (atomicfile.CheckUniqueKeys), which a read into a map
// refuses. The error wraps a
// *atomicfile.CorruptError naming p (errors.As), whose Remedy says what to
// give instead. Nothing is staged for a refused write.
func (tx *Tx) WriteFile(p string, data []byte) error {
	return tx.write("WriteFile", p, data, "")
}

// write is WriteFile, its errors naming the Tx method op. encoded is the
// extension of the format data was encoded in and checked by its encoder
// (".yaml", ".json"), or "" for bytes the caller gave: when it is the
// format the path's extension says, data is not parsed again.
func (tx *Tx) write(op, p string, data []byte, encoded string) error {
	rel, err := tx.check(op, p)
	if err != nil {
		return err
	}
	if err := tx.checkPlace(op, p, rel); err != nil {
		return err
	}
	if n := len(path.Base(rel)); n > atomicfile.MaxName {
		return &PathError{Op: op, Path: p, Reason: fmt.Sprintf("the file's name is %d bytes, more than the %d a config file's name may have "+
			"(the file system takes 255, and the name of its temporary file adds the rest)", n, atomicfile.MaxName)}
	}
	if limit := tx.env.maxFileSize(); limit >= 0 && int64(len(data)) > limit {
		return fmt.Errorf("lifecycle: tx.%s(%q): %d bytes is more than the %d a config file may hold (Options.MaxFileSize): %w",
			op, p, len(data), limit, atomicfile.ErrTooLarge)
	}
	if err := tx.checkContent(op, p, rel, data, encoded); err != nil {
		return err
	}
	tx.writes[rel] = &txWrite{data: slices.Clone(data)}
	return nil
}

// checkContent refuses data that the next start's recovery would
// quarantine as the config file rel, as a *atomicfile.CorruptError whose
// Remedy says what to give instead. Data encoded in the format of rel's
// extension (see write) is only validated.
func (tx *Tx) checkContent(op, p, rel string, data []byte, encoded string) error {
	var (
		want string
		err  error
	)
	switch ext := strings.ToLower(path.Ext(rel)); {
	case encoded != "" && (ext == encoded || ext == ".yml" && encoded == ".yaml"):
		if tx.env.Validate != nil {
			want, err = "content Options.Validate accepts", tx.env.Validate(rel, data)
		}
	default:
		want, err = checkConfig(rel, data, tx.env.Validate)
	}
	remedy := "the next start would quarantine this file as corrupt"
	if err == nil && encoded == "" && (strings.EqualFold(path.Ext(rel), ".yaml") || strings.EqualFold(path.Ext(rel), ".yml")) {
		// Recovery keeps such a file (a struct read that skips the
		// mapping accepts it), but a read into a map refuses it: bytes
		// written here give each key once.
		if err = atomicfile.CheckUniqueKeys(rel, data); err != nil {
			want, remedy = "YAML that gives each key of a mapping once", "reads of it into a map would fail"
		}
	}
	if err == nil {
		return nil
	}
	ce := &atomicfile.CorruptError{Path: rel, Err: err}
	if c := (*atomicfile.CorruptError)(nil); errors.As(err, &c) {
		copied := *c
		ce = &copied
	}
	ce.Remedy = "nothing was written: give " + want + "; " + remedy
	return fmt.Errorf("lifecycle: tx.%s(%q): %w", op, p, ce)
}

// checkConfig is recovery.CheckConfig, and, when it refuses data, what to
// give instead, in the caller's terms: "content that parses as YAML",
// "content Options.Validate accepts".
func checkConfig(rel string, data []byte, validate func(path string, data []byte) error) (want string, err error) {
	byValidate := false
	if v := validate; v != nil {
		validate = func(path string, data []byte) error {
			err := v(path, data)
			byValidate = err != nil
			return err
		}
	}
	if err := recovery.CheckConfig(rel, data, validate); err != nil {
		if byValidate {
			return "content Options.Validate accepts", err
		}
		kind := strings.ToUpper(strings.TrimPrefix(path.Ext(rel), "."))
		if kind == "YML" {
			kind = "YAML"
		}
		return "content that parses as " + kind, err
	}
	return "", nil
}

// Remove stages the removal of the config file at p. A file that is not
// there gives an error matching fs.ErrNotExist, and nothing is staged.
func (tx *Tx) Remove(p string) error {
	rel, err := tx.check("Remove", p)
	if err != nil {
		return err
	}
	if _, err := tx.read("Remove", rel); err != nil {
		return err
	}
	tx.writes[rel] = &txWrite{removed: true}
	return nil
}

// ReadYAML decodes the YAML config file at p into v, a non-nil pointer,
// as atomicfile.ReadYAML does; unknown fields are ignored. A missing file
// (or one the transaction removed) gives an error matching
// fs.ErrNotExist, as ReadFile does, and leaves v as it was: test it with
// errors.Is to start from defaults.
func (tx *Tx) ReadYAML(p string, v any) error {
	data, err := tx.read("ReadYAML", p)
	if err != nil {
		return err
	}
	return atomicfile.ParseYAML(tx.env.abs(path.Clean(p)), data, v)
}

// ReadYAMLStrict is ReadYAML, but an unknown field is a
// *atomicfile.CorruptError.
func (tx *Tx) ReadYAMLStrict(p string, v any) error {
	data, err := tx.read("ReadYAMLStrict", p)
	if err != nil {
		return err
	}
	return atomicfile.ParseYAMLStrict(tx.env.abs(path.Clean(p)), data, v)
}

// WriteYAML stages v, encoded as atomicfile.WriteYAML writes it, as the
// config file at p; what WriteFile refuses, it refuses.
func (tx *Tx) WriteYAML(p string, v any) error {
	if _, err := tx.check("WriteYAML", p); err != nil {
		return err
	}
	data, err := atomicfile.EncodeYAML(p, v) // read back as YAML: it parses
	if err != nil {
		return fmt.Errorf("lifecycle: tx.WriteYAML(%q): nothing was written: %w", p, err)
	}
	return tx.write("WriteYAML", p, data, ".yaml")
}

// ReadJSON decodes the JSON config file at p into v, as
// atomicfile.ReadJSON does.
func (tx *Tx) ReadJSON(p string, v any) error {
	data, err := tx.read("ReadJSON", p)
	if err != nil {
		return err
	}
	return atomicfile.ParseJSON(tx.env.abs(path.Clean(p)), data, v)
}

// ReadJSONStrict is ReadJSON, but an unknown field is a
// *atomicfile.CorruptError.
func (tx *Tx) ReadJSONStrict(p string, v any) error {
	data, err := tx.read("ReadJSONStrict", p)
	if err != nil {
		return err
	}
	return atomicfile.ParseJSONStrict(tx.env.abs(path.Clean(p)), data, v)
}

// WriteJSON stages v, encoded as atomicfile.WriteJSON writes it, as the
// config file at p; what WriteFile refuses, it refuses.
func (tx *Tx) WriteJSON(p string, v any) error {
	if _, err := tx.check("WriteJSON", p); err != nil {
		return err
	}
	data, err := atomicfile.EncodeJSON(p, v) // encoding/json's output parses
	if err != nil {
		return fmt.Errorf("lifecycle: tx.WriteJSON(%q): nothing was written: %w", p, err)
	}
	return tx.write("WriteJSON", p, data, ".json")
}

// List returns the config files directly in the directory dir ("" or "."
// for ConfigDir itself) as paths relative to ConfigDir, sorted, as the
// transaction sees them: with its own and earlier transactions' writes
// and removals. A directory that is not there lists nothing.
func (tx *Tx) List(dir string) ([]string, error) {
	rel := ""
	if dir != "" && dir != "." {
		var err error
		if rel, err = tx.check("List", dir); err != nil {
			return nil, err
		}
	}
	if l := tx.linkOn(rel); l != "" {
		return nil, &PathError{Op: "List", Path: dir, Reason: fmt.Sprintf("%q is a symbolic link; config files are kept in directories of ConfigDir only", l)}
	}
	have := map[string]bool{}
	entries, err := os.ReadDir(tx.env.abs(rel))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		p := path.Join(rel, e.Name())
		if e.Type().IsRegular() && badPath(p) == "" {
			have[p] = true
		}
	}
	inDir := func(p string) bool { return path.Dir(p) == path.Clean("./"+rel) }
	for p, removed := range tx.env.stagedPaths() {
		if inDir(p) {
			have[p] = !removed
		}
	}
	for p, w := range tx.writes {
		if inDir(p) {
			have[p] = !w.removed
		}
	}
	var out []string
	for p, ok := range have {
		if ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// check returns p cleaned, or a *PathError saying why it names no config
// file. A closed Tx refuses everything.
func (tx *Tx) check(op, p string) (string, error) {
	if tx.closed {
		return "", fmt.Errorf("lifecycle: tx.%s(%q): the transaction is over (its function returned); use the Tx only inside it", op, p)
	}
	if r := badPath(p); r != "" {
		if rel, err := filepath.Rel(tx.env.ConfigDir, p); err == nil && filepath.IsAbs(p) && filepath.IsLocal(rel) {
			// A path in ConfigDir, spelled whole: say what to write (a
			// tool's error shows the client paths relative to it).
			r += fmt.Sprintf(", as %q", filepath.ToSlash(rel))
		}
		return "", &PathError{Op: op, Path: p, Reason: strings.ReplaceAll(r, "ConfigDir", "ConfigDir ("+tx.env.ConfigDir+")")}
	}
	return p, nil
}

// linkOn returns the first of rel's directories, or rel itself, that is a
// symbolic link in the work tree, or "".
func (tx *Tx) linkOn(rel string) string {
	if rel == "" {
		return ""
	}
	parts := strings.Split(rel, "/")
	for i := 1; i <= len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		fi, err := os.Lstat(tx.env.abs(p))
		switch {
		case err != nil:
			return ""
		case fi.Mode()&fs.ModeSymlink != 0:
			return p
		}
	}
	return ""
}

// checkPlace refuses a file where a directory is, or under a file.
func (tx *Tx) checkPlace(op, p, rel string) error {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if w, ok := tx.writes[dir]; ok && !w.removed {
			return &PathError{Op: op, Path: p, Reason: fmt.Sprintf("%q is a file this transaction wrote, so nothing can be under it", dir)}
		}
		fi, err := os.Lstat(tx.env.abs(dir))
		switch {
		case err != nil:
			return nil // missing from here down: made when the change is applied
		case fi.Mode()&fs.ModeSymlink != 0:
			return &PathError{Op: op, Path: p, Reason: fmt.Sprintf("%q is a symbolic link; config files are written in directories of ConfigDir only", dir)}
		case !fi.IsDir():
			return &PathError{Op: op, Path: p, Reason: fmt.Sprintf("%q is a file, so nothing can be under it", dir)}
		}
	}
	if fi, err := os.Lstat(tx.env.abs(rel)); err == nil && fi.IsDir() {
		return &PathError{Op: op, Path: p, Reason: "it is a directory; name a file in it"}
	}
	return nil
}

// badPath says why p names no config file, or is "".
func badPath(p string) string {
	switch {
	case p == "":
		return "the path is empty; name a file relative to ConfigDir, such as \"settings.yaml\""
	case p == ".":
		return "the path names ConfigDir itself; name a file in it, such as \"settings.yaml\""
	case strings.ContainsRune(p, 0):
		return "the path holds a NUL byte"
	case path.IsAbs(p) || filepath.IsAbs(p):
		return "the path is absolute; give it relative to ConfigDir"
	case p == ".." || strings.HasPrefix(p, "../"):
		return "the path leaves ConfigDir; give one inside it, relative to it"
	case path.Clean(p) != p:
		c := path.Clean(p)
		if why := badPath(c); why != "" {
			return why // what its clean form would be refused for, not a fix that is refused
		}
		return fmt.Sprintf("the path is not clean; write it %q", c)
	}
	for i, part := range strings.Split(p, "/") {
		switch {
		case strings.EqualFold(part, ".git"):
			return "the path is inside .git, the repository's own files; config files live beside it"
		case i == 0 && strings.HasPrefix(strings.ToLower(part), ".git."):
			return "the name is one the toolkit gives copies of .git it sets aside; choose another"
		case atomicfile.IsTemp(part):
			return "the name is one of a temporary file of an interrupted write; choose another"
		}
	}
	return ""
}

// changes returns the staged writes as gitstore changes, in path order.
func (tx *Tx) changes() ([]gitstore.Change, []string) {
	paths := make([]string, 0, len(tx.writes))
	for p := range tx.writes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([]gitstore.Change, len(paths))
	for i, p := range paths {
		w := tx.writes[p]
		out[i] = gitstore.Change{Path: p, Data: w.data, Remove: w.removed}
	}
	return out, paths
}

// maxFileSize is the largest config file Reader reads, or -1 for no
// limit.
func (e *Env) maxFileSize() int64 {
	switch {
	case e.MaxFileSize == 0:
		return atomicfile.DefaultMaxSize
	case e.MaxFileSize < 0:
		return -1
	}
	return e.MaxFileSize
}
