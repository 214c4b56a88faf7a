//go:build unix

package tail

import (
	"os"
	"syscall"
)

// fileID returns the device and inode of fi (Dev is not a uint64 on every
// platform, hence the conversion).
func fileID(fi os.FileInfo) (FileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, false
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, true
}
