package atomicfile

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writing the dirty
// pages out, without waiting.
const syncFileRangeWrite = 0x2

// startWriteback asks the kernel to start writing f's data to the disk now,
// so that the fsyncs of several files wait for disk writes that overlap
// rather than run one after another. It is only a hint: it makes nothing
// durable (the fsync that follows does), so its error is ignored.
func startWriteback(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SyncFileRange(int(fd), 0, 0, syncFileRangeWrite)
	})
}
