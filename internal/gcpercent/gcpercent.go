// Package gcpercent sets the garbage collector's target for one phase of
// a process's work, unless the user chose one with $GOGC.
package gcpercent

import (
	"os"
	"runtime/debug"
)

// Tune sets the collector's target percentage (debug.SetGCPercent) to
// percent and returns what puts the previous one back; with $GOGC set it
// changes nothing and restore does nothing. It is for a process that does
// one kind of work at a time: the setting is the whole process's.
func Tune(percent int) (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(old) }
}
