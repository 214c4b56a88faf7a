//go:build !unix

package index

import (
	"fmt"
	"os"
)

// mapFile reads path: this platform maps nothing.
func mapFile(path string) ([]byte, func(), error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, func() {}, nil
}
