// Package barrier makes groups of files and directories durable at once,
// and counts what it does for tests.
//
// A barrier is one call of Sync: every fsync in it is started at once and
// Sync returns when all are done, so the group costs about one disk flush
// instead of one per file. Whatever must be durable before a later step
// (a commit record before the renames it names) goes in an earlier
// barrier. The package does nothing else: it opens no file it is not given
// a path to, and it does not retry.
//
// Counting is for tests that must prove how many barriers and fsyncs a
// code path makes without timing it: SetCounter installs a Counter that
// every fsync of the module (atomicfile, gitstore) reports to.
package barrier

import (
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// Op is one fsync of a barrier: of an open file, or of the file or
// directory at a path.
type Op struct {
	File *os.File // the file to fsync; when nil, Path is opened
	Path string   // the file or directory to fsync when File is nil; in errors either way
}

// FileOp returns the fsync of an open file.
func FileOp(f *os.File) Op { return Op{File: f, Path: f.Name()} }

// DirOp returns the fsync of the directory at path.
func DirOp(path string) Op { return Op{Path: path} }

// Counter counts barriers and fsyncs. Its zero value is ready.
type Counter struct {
	barriers, fsyncs atomic.Int64
}

// Barriers returns how many barriers ran since the counter was installed.
func (c *Counter) Barriers() int64 { return c.barriers.Load() }

// Fsyncs returns how many fsyncs ran since the counter was installed.
func (c *Counter) Fsyncs() int64 { return c.fsyncs.Load() }

var counter atomic.Pointer[Counter]

// SetCounter makes c count every barrier and fsync of the process from
// now on (nil stops counting) and returns the counter it replaces. For
// tests; a barrier of one fsync counts as one barrier.
func SetCounter(c *Counter) *Counter { return counter.Swap(c) }

// Sync runs every op at once and waits for them all: one barrier. It
// returns the error of the first op, in the order given, that failed: a
// *fs.PathError naming the op's Path. An empty list is no barrier.
func Sync(ops ...Op) error {
	if len(ops) == 0 {
		return nil
	}
	if c := counter.Load(); c != nil {
		c.barriers.Add(1)
	}
	if len(ops) == 1 {
		return ops[0].run()
	}
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i := range ops {
		wg.Go(func() { errs[i] = ops[i].run() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (o Op) run() error {
	if c := counter.Load(); c != nil {
		c.fsyncs.Add(1)
	}
	f := o.File
	if f == nil {
		var err error
		if f, err = os.Open(o.Path); err != nil {
			return err
		}
		defer f.Close()
	}
	if err := f.Sync(); err != nil {
		if pe, ok := err.(*fs.PathError); ok {
			err = pe.Err // named by Path, which may differ from the file's (a temporary file's target)
		}
		return &fs.PathError{Op: "fsync", Path: o.Path, Err: err}
	}
	return nil
}
