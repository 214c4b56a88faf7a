//go:build unix

package confine

import "syscall"

// oNoFollow makes an open fail on a symlink.
const oNoFollow = syscall.O_NOFOLLOW
