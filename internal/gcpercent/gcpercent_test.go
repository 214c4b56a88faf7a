package gcpercent

import (
	"runtime/debug"
	"testing"
)

// TestTuneHonoursGOGC: Tune sets and restores the target, and leaves a
// user's $GOGC alone.
func TestTuneHonoursGOGC(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	restore := Tune(321)
	if got := debug.SetGCPercent(321); got != 321 {
		t.Fatalf("target %d under Tune(321)", got)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("target %d after restore, want 100", got)
	}
	t.Setenv("GOGC", "150")
	restore = Tune(321)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("target %d under Tune with $GOGC set, want it untouched (100)", got)
	}
	restore()
}
