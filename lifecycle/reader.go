package lifecycle

import "github.com/mcpkeep/mcpkeep/atomicfile"

// Reader returns the atomicfile.Reader for config files: rooted at
// ConfigDir, so that no link below it is followed, and limited to
// MaxFileSize bytes. A tool reads its files through it, by absolute paths
// or paths relative to ConfigDir (as Tx's).
func (e *Env) Reader() atomicfile.Reader {
	return atomicfile.Reader{Root: e.ConfigDir, MaxSize: e.MaxFileSize}
}
