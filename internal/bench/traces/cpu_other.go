//go:build !unix

package traces

import "time"

// cpuTime is unavailable here: 0.
func cpuTime() time.Duration { return 0 }
