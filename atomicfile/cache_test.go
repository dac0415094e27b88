package atomicfile_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
)

// person is a value with a map, which a Cache must copy.
type person struct {
	Name  string            `yaml:"name"`
	Prefs map[string]string `yaml:"prefs"`
}

// personCache returns a Cache of person files below root that counts its
// decodes in *decodes.
func personCache(root string, decodes *int) *atomicfile.Cache[person] {
	var mu sync.Mutex
	return &atomicfile.Cache[person]{
		Reader: atomicfile.Reader{Root: root},
		Decode: func(path string, data []byte) (person, error) {
			mu.Lock()
			*decodes++
			mu.Unlock()
			var p person
			err := atomicfile.ParseYAMLStrict(path, data, &p)
			return p, err
		},
		Clone: func(p person) person {
			p.Prefs = maps.Clone(p.Prefs)
			return p
		},
	}
}

// later makes c see every file as settled: its clock runs an hour ahead.
func later[T any](c *atomicfile.Cache[T]) {
	atomicfile.SetCacheClock(c, func() time.Time { return time.Now().Add(time.Hour) })
}

func writePerson(t *testing.T, path, tone string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte("name: a\nprefs:\n  tone: "+tone+"\n"), 0o600))
}

func TestCacheServesASettledFileWithoutReadingIt(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.yaml")
	writePerson(t, path, "calm")
	var decodes int
	c := personCache(root, &decodes)
	later(c)
	for range 3 {
		p, err := c.Read(path)
		require.NoError(t, err)
		assert.Equal(t, "calm", p.Prefs["tone"])
	}
	assert.Equal(t, 1, atomicfile.CacheReads(c), "reads from disk")
	assert.Equal(t, 1, decodes)
}

func TestCacheReadsARecentFileAgainButDecodesItOnce(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.yaml")
	writePerson(t, path, "calm")
	var decodes int
	c := personCache(root, &decodes) // the real clock: the file was written just now
	for range 3 {
		p, err := c.Read(path)
		require.NoError(t, err)
		assert.Equal(t, "calm", p.Prefs["tone"])
	}
	assert.Equal(t, 3, atomicfile.CacheReads(c), "a file changed less than SettleTime ago is read at each Read")
	assert.Equal(t, 1, decodes, "the same bytes are not decoded again")
}

// A file rewritten in place at the same size, in the same tick of the
// file system's clock, has the same lstat but for the change time's last
// digits, if any: a Cache must still never return the old value.
func TestCacheSeesAnEditInPlaceAtTheSameSize(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.yaml")
	var decodes int
	c := personCache(root, &decodes)
	for i := range 300 {
		tone := fmt.Sprintf("t%03d", i) // the same size every time
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("name: a\nprefs:\n  tone: "+tone+"\n"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		p, err := c.Read(path)
		require.NoError(t, err)
		require.Equal(t, tone, p.Prefs["tone"], "edit %d", i)
	}
}

func TestCacheSeesAReplace(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.yaml")
	writePerson(t, path, "calm")
	var decodes int
	c := personCache(root, &decodes)
	later(c) // trusts lstat: only the replace's new inode and times tell
	_, err := c.Read(path)
	require.NoError(t, err)
	for _, tone := range []string{"bold", "dry", "calm"} {
		require.NoError(t, atomicfile.WriteFile(path, []byte("name: a\nprefs:\n  tone: "+tone+"\n"), 0))
		p, err := c.Read(path)
		require.NoError(t, err)
		assert.Equal(t, tone, p.Prefs["tone"])
	}
}

func TestCacheReturnsCopies(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.yaml")
	writePerson(t, path, "calm")
	var decodes int
	c := personCache(root, &decodes)
	later(c)
	p, err := c.Read(path)
	require.NoError(t, err)
	p.Prefs["tone"] = "changed by the caller"
	p, err = c.Read(path)
	require.NoError(t, err)
	assert.Equal(t, "calm", p.Prefs["tone"])
}

// What a Reader refuses, a Cache refuses too, even for a path it holds a
// value of: the cached value is never returned for it.
func TestCacheRefusesWhatTheReaderRefuses(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, root, path string)
		want   error
	}{
		{"file replaced by a link", func(t *testing.T, root, path string) {
			keep := filepath.Join(t.TempDir(), "a.yaml")
			require.NoError(t, os.Rename(path, keep))
			require.NoError(t, os.Symlink(keep, path))
		}, atomicfile.ErrNotRegular},
		{"directory replaced by a link to it, file and all", func(t *testing.T, root, path string) {
			// The same inode, the same times: only the link differs.
			moved := filepath.Join(t.TempDir(), "moved")
			require.NoError(t, os.Rename(filepath.Dir(path), moved))
			require.NoError(t, os.Symlink(moved, filepath.Dir(path)))
		}, atomicfile.ErrNotRegular},
		{"file replaced by a fifo", func(t *testing.T, root, path string) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, syscall.Mkfifo(path, 0o600))
		}, atomicfile.ErrNotRegular},
		{"file grown past MaxSize", func(t *testing.T, root, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.WriteString("# " + string(make([]byte, 200)) + "\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, atomicfile.ErrTooLarge},
		{"file removed", func(t *testing.T, root, path string) {
			require.NoError(t, os.Remove(path))
		}, fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, "sub", "a.yaml")
			require.NoError(t, os.Mkdir(filepath.Dir(path), 0o700))
			writePerson(t, path, "calm")
			var decodes int
			c := personCache(root, &decodes)
			c.Reader.MaxSize = 100
			later(c)
			_, err := c.Read(path)
			require.NoError(t, err)
			tc.change(t, root, path)
			err = readWithin(t, func() error { _, err := c.Read(path); return err })
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestCacheDoesNotKeepErrors(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: a\nunknown: 1\n"), 0o600))
	var decodes int
	c := personCache(root, &decodes)
	later(c)
	for range 2 {
		_, err := c.Read(path)
		var ce *atomicfile.CorruptError
		require.ErrorAs(t, err, &ce)
	}
	assert.Equal(t, 2, decodes, "a file that failed is decoded again")
	writePerson(t, path, "calm")
	p, err := c.Read(path)
	require.NoError(t, err)
	assert.Equal(t, "calm", p.Prefs["tone"])
}

func TestCacheKeepsAtMostMaxEntries(t *testing.T) {
	root := t.TempDir()
	var decodes int
	c := personCache(root, &decodes)
	c.MaxEntries = 2
	later(c)
	var paths []string
	for i := range 3 {
		path := filepath.Join(root, fmt.Sprintf("p%d.yaml", i))
		writePerson(t, path, "calm")
		paths = append(paths, path)
	}
	for _, p := range paths {
		_, err := c.Read(p)
		require.NoError(t, err)
		assert.LessOrEqual(t, atomicfile.CacheLen(c), 2)
	}
	assert.Equal(t, 2, atomicfile.CacheLen(c))
}

func TestCacheWithoutDecode(t *testing.T) {
	var c atomicfile.Cache[person]
	_, err := c.Read(filepath.Join(t.TempDir(), "a.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Cache.Decode is nil")
}

func TestCacheConcurrentReadsAndWrites(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.yaml")
	writePerson(t, path, "t000")
	var decodes int
	c := personCache(root, &decodes)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, err := c.Read(path)
				if err == nil && len(p.Prefs["tone"]) != 4 {
					err = errors.New("torn value " + p.Prefs["tone"])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 100 {
		tone := fmt.Sprintf("t%03d", i)
		require.NoError(t, atomicfile.WriteFile(path, []byte("name: a\nprefs:\n  tone: "+tone+"\n"), 0))
		p, err := c.Read(path)
		require.NoError(t, err)
		require.Equal(t, tone, p.Prefs["tone"])
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
