package gitstore

import (
	"io/fs"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat copies the stat data git compares into an index entry, so the
// git CLI sees a clean work tree without rehashing every file.
func fillStat(e *index.Entry, info fs.FileInfo) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		e.CreatedAt = ctime(st)
		e.Dev, e.Inode = uint32(st.Dev), uint32(st.Ino)
		e.UID, e.GID = st.Uid, st.Gid
	}
}
