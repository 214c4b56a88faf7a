//go:build !unix

package proc

import "time"

// SelfCPU is unavailable here: 0.
func SelfCPU() time.Duration { return 0 }
