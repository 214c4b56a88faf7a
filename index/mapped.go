package index

import "runtime"

// MapFile returns the bytes of the generation file at path, mapped
// read-only where the platform allows (read into memory elsewhere),
// unmapped once owner is unreachable. The caller must not keep the bytes,
// or anything made of them, beyond owner's life.
func MapFile[T any](path string, owner *T) ([]byte, error) {
	b, release, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	runtime.AddCleanup(owner, func(f func()) { f() }, release)
	return b, nil
}
