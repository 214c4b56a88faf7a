//go:build !unix

package tail

import "os"

// fileID has no device and inode to offer on this platform: rotation is then
// not detected.
func fileID(os.FileInfo) (FileID, bool) { return FileID{}, false }
