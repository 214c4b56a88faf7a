//go:build !unix

package confine

// oNoFollow is 0 where open has no O_NOFOLLOW: the Lstat before the open
// and the mode check after it still refuse a symlink or a special file.
const oNoFollow = 0
