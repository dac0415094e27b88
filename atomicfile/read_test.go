package atomicfile_test

import (
	"bytes"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// secretOutside is the content of a file a link points to: no read may
// return it, and no error may quote it.
const secretOutside = "root:*:20228:0:99999:7:::\n"

// hostileTree makes, in a fresh directory, a file outside the tree and a
// tree holding every kind of entry a read must refuse, and returns the
// tree's path.
func hostileTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	outside := filepath.Join(dir, "shadow")
	require.NoError(t, os.WriteFile(outside, []byte(secretOutside), 0o600))
	tree := filepath.Join(dir, "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(tree, "sub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(tree, "ok.yaml"), []byte("name: ok\n"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(tree, "out.yaml")))
	require.NoError(t, os.Symlink("ok.yaml", filepath.Join(tree, "in.yaml")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(tree, "pipe.yaml"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(tree, "dir.yaml"), 0o700))
	require.NoError(t, os.Symlink(dir, filepath.Join(tree, "linkdir")))
	sock := filepath.Join(tree, "sock.yaml")
	if len(sock) < 100 { // a socket's path has a length limit
		ln, err := net.Listen("unix", sock)
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
	}
	return tree
}

// readWithin runs read and fails the test if it has not returned after
// hangAfter: a read that waits on a fifo's writer is the bug.
func readWithin(t *testing.T, read func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- read() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangAfter):
		t.Fatalf("the read still blocks after %v", hangAfter)
		return nil
	}
}

// hangAfter bounds a read that should return at once; a failure detector,
// not a speed goal.
const hangAfter = 30 * time.Second

// TestReadRefusesWhatIsNotARegularFile: a link (to a file outside the tree
// or inside it), a fifo, a directory and a socket are each refused, by every
// read, with a *RefusedError that names the path and says what it is; no
// read blocks and no error carries a byte of the file a link points to.
func TestReadRefusesWhatIsNotARegularFile(t *testing.T) {
	tree := hostileTree(t)
	for _, tc := range []struct {
		name, kind string
	}{
		{"out.yaml", "a symbolic link"},
		{"in.yaml", "a symbolic link"},
		{"pipe.yaml", "a named pipe (fifo)"},
		{"dir.yaml", "a directory"},
		{"sock.yaml", "a socket"},
	} {
		path := filepath.Join(tree, tc.name)
		if _, err := os.Lstat(path); err != nil {
			continue // no socket on a long temporary path
		}
		for fn, read := range map[string]func() error{
			"ReadFile":            func() error { _, err := atomicfile.ReadFile(path); return err },
			"ReadYAML":            func() error { var v any; return atomicfile.ReadYAML(path, &v) },
			"ReadYAMLStrict":      func() error { var v struct{}; return atomicfile.ReadYAMLStrict(path, &v) },
			"ReadJSON":            func() error { var v any; return atomicfile.ReadJSON(path, &v) },
			"Reader{Root}":        func() error { _, err := atomicfile.Reader{Root: tree}.ReadFile(path); return err },
			"Reader{MaxSize: -1}": func() error { _, err := atomicfile.Reader{MaxSize: -1}.ReadFile(path); return err },
			"Backup":              func() error { _, err := atomicfile.Backup(path, t.TempDir()); return err },
		} {
			t.Run(tc.name+"/"+fn, func(t *testing.T) {
				err := readWithin(t, read)
				var re *atomicfile.RefusedError
				require.ErrorAs(t, err, &re)
				require.ErrorIs(t, err, atomicfile.ErrNotRegular)
				assert.NotErrorIs(t, err, atomicfile.ErrTooLarge)
				assert.Equal(t, path, re.Path)
				assert.Equal(t, tc.kind, re.Kind())
				assert.Contains(t, err.Error(), path, "names the path")
				assert.Contains(t, err.Error(), tc.kind, "says what it is")
				assert.Contains(t, err.Error(), "replace it with a regular file", "says what to do")
				assert.NotContains(t, err.Error(), "root:*", "quotes nothing of the file a link points to")
			})
		}
	}
}

// TestReaderRootRefusesALinkedDirectory: with Root, a link to a directory
// below the root is refused, naming the link, where a read without Root
// goes through it; a path outside Root is refused.
func TestReaderRootRefusesALinkedDirectory(t *testing.T) {
	tree := hostileTree(t)
	through := filepath.Join(tree, "linkdir", "shadow")
	data, err := atomicfile.ReadFile(through)
	require.NoError(t, err, "without Root, only the last component is not followed")
	assert.Equal(t, secretOutside, string(data))

	_, err = atomicfile.Reader{Root: tree}.ReadFile(through)
	var re *atomicfile.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, filepath.Join(tree, "linkdir"), re.Path, "names the link")
	assert.Equal(t, "a symbolic link", re.Kind())

	_, err = atomicfile.Reader{Root: filepath.Join(tree, "sub")}.ReadFile(filepath.Join(tree, "ok.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not inside")

	data, err = atomicfile.Reader{Root: tree}.ReadFile(filepath.Join(tree, "ok.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "name: ok\n", string(data))

	_, err = atomicfile.Reader{Root: tree}.ReadFile(filepath.Join(tree, "sub", "none.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestReaderRootRelativePath: with Root, a relative path is relative to
// Root, not to the current directory, under the same rules: a link below
// Root is refused, and ".." out of Root is refused, saying what to give.
func TestReaderRootRelativePath(t *testing.T) {
	tree := hostileTree(t)
	r := atomicfile.Reader{Root: tree}
	data, err := r.ReadFile("ok.yaml")
	require.NoError(t, err)
	assert.Equal(t, "name: ok\n", string(data))

	_, err = r.ReadFile(filepath.Join("linkdir", "shadow"))
	var re *atomicfile.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "a symbolic link", re.Kind())

	_, err = atomicfile.Reader{Root: filepath.Join(tree, "sub")}.ReadFile(filepath.Join("..", "ok.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not inside")
	assert.Contains(t, err.Error(), "absolute or relative to it", "says what to give")

	_, err = r.ReadFile(filepath.Join("sub", "none.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestReadSizeLimit: a file over the limit is refused before it is read,
// with its size and the limit; the default is DefaultMaxSize; a negative
// MaxSize reads any size.
func TestReadSizeLimit(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at.yaml")
	over := filepath.Join(dir, "over.yaml")
	require.NoError(t, os.WriteFile(at, bytes.Repeat([]byte("#"), int(atomicfile.DefaultMaxSize)), 0o600))
	require.NoError(t, os.WriteFile(over, bytes.Repeat([]byte("#"), int(atomicfile.DefaultMaxSize)+1), 0o600))

	data, err := atomicfile.ReadFile(at)
	require.NoError(t, err)
	assert.Len(t, data, int(atomicfile.DefaultMaxSize))

	var v any
	for _, err := range []error{
		func() error { _, err := atomicfile.ReadFile(over); return err }(),
		atomicfile.ReadYAML(over, &v),
		atomicfile.ReadJSONStrict(over, &v),
	} {
		var re *atomicfile.RefusedError
		require.ErrorAs(t, err, &re)
		require.ErrorIs(t, err, atomicfile.ErrTooLarge)
		assert.NotErrorIs(t, err, atomicfile.ErrNotRegular)
		assert.Equal(t, atomicfile.DefaultMaxSize+1, re.Size)
		assert.Equal(t, atomicfile.DefaultMaxSize, re.Limit)
		assert.Equal(t, "a regular file", re.Kind())
		assert.Contains(t, err.Error(), "1,048,577 bytes, more than the 1,048,576")
		assert.Contains(t, err.Error(), over)
	}

	_, err = atomicfile.Reader{MaxSize: 100}.ReadFile(at)
	require.ErrorIs(t, err, atomicfile.ErrTooLarge)
	data, err = atomicfile.Reader{MaxSize: -1}.ReadFile(over)
	require.NoError(t, err)
	assert.Len(t, data, int(atomicfile.DefaultMaxSize)+1)

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	data, err = atomicfile.Reader{MaxSize: 1}.ReadFile(empty)
	require.NoError(t, err)
	assert.Empty(t, data)
}

// TestCorruptErrorSummary: the summary and excerpt of a corrupt file say
// what is wrong and where, and quote at most MaxExcerpt bytes of the
// offending line, where the decoder's message quotes the file's values.
func TestCorruptErrorSummary(t *testing.T) {
	type persona struct {
		Name  string            `yaml:"name" json:"name"`
		Prefs map[string]string `yaml:"prefs" json:"prefs"`
		N     int               `yaml:"n" json:"n"`
	}
	long := strings.Repeat("s3cr3t", 20)
	for _, tc := range []struct {
		name, file, data, summary string
		line                      int
	}{
		{"unknown field", "a.yaml", "name: a\n" + long + ": x\n", "unknown field", 2},
		{"wrong type", "a.yaml", "name: a\nn: " + long + "\n", "a string where another type is wanted", 2},
		{"list for a string", "a.yaml", "name: [" + long + "]\n", "a list where another type is wanted", 1},
		{"key twice", "a.yaml", "name: a\nprefs:\n  " + long + ": 1\n  " + long + ": 2\n", "a key given twice (first at line 3)", 4},
		{"syntax", "a.yaml", "name: a\n  " + long + ": [\n", "not valid YAML: mapping values are not allowed in this context", 2},
		{"unknown anchor", "a.yaml", "name: *" + long + "\n", "an alias to an anchor not defined before it", 0},
		{"second document", "a.yaml", "name: a\n--- " + long + "\n", "a second YAML document begins here (a file holds one)", 2},
		{"json syntax", "a.json", "{\"name\": " + long + "}", "not valid JSON", 1},
		{"json unknown field", "a.json", "{\"" + long + "\": 1}", "unknown field", 1},
		{"json wrong type", "a.json", "{\"n\": \"" + long + "\"}", "a value of the wrong type (string)", 1},
		{"json torn", "a.json", "{\"name\": \"" + long, "the file ends in the middle of a value", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			var p persona
			var err error
			if strings.HasSuffix(tc.file, ".json") {
				err = atomicfile.ReadJSONStrict(path, &p)
			} else {
				err = atomicfile.ReadYAMLStrict(path, &p)
			}
			var ce *atomicfile.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.summary, ce.Summary())
			assert.NotContains(t, ce.Summary(), "s3cr3t")
			if tc.line > 0 {
				assert.Equal(t, tc.line, ce.Line)
				assert.LessOrEqual(t, len(ce.Excerpt), atomicfile.MaxExcerpt)
				assert.True(t, strings.HasPrefix(strings.Split(tc.data, "\n")[tc.line-1], ce.Excerpt), "the excerpt %q is the start of line %d", ce.Excerpt, tc.line)
				assert.NotEmpty(t, ce.Excerpt)
			}
		})
	}
}

// TestExcerptCutsAtACharacter: an excerpt never ends inside a UTF-8
// character.
func TestExcerptCutsAtACharacter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	line := strings.Repeat("é", 30) + ": [" // 2 bytes each: byte 40 ends a character, 39 does not
	require.NoError(t, os.WriteFile(path, []byte("x"+line+"\n"), 0o600))
	var v any
	var ce *atomicfile.CorruptError
	require.ErrorAs(t, atomicfile.ReadYAML(path, &v), &ce)
	require.Equal(t, 1, ce.Line)
	assert.Equal(t, "x"+strings.Repeat("é", 19), ce.Excerpt)
}

// TestReadOwned: ReadOwned reads as ReadFile does and says whose the file
// it read is and its permission bits; a link is refused, not followed.
func TestReadOwned(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(path, []byte("s\n"), 0o600))
	require.NoError(t, os.Chmod(path, 0o640))
	data, uid, perm, err := atomicfile.Reader{}.ReadOwned(path)
	require.NoError(t, err)
	assert.Equal(t, "s\n", string(data))
	assert.Equal(t, os.Geteuid(), uid)
	assert.Equal(t, fs.FileMode(0o640), perm)

	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(path, link))
	_, _, _, err = atomicfile.Reader{}.ReadOwned(link)
	assert.ErrorIs(t, err, atomicfile.ErrNotRegular)
}
