package worker

import "github.com/verdryx/verdryx/confine"

// Roots are the directories paths named in messages may resolve under. A
// path outside every root, or a symlink leading out of one, is refused
// before anything is read (confine.Roots).
type Roots = confine.Roots

// ErrOutsideRoots is returned for a path that escapes every root.
var ErrOutsideRoots = confine.ErrOutsideRoots
