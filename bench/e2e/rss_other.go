//go:build !unix

package e2e

import "os"

// peakRSS is not measured here.
func peakRSS(*os.ProcessState) int64 { return 0 }

// minorFaults is not measured here.
func minorFaults(*os.ProcessState) int64 { return 0 }
