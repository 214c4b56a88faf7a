package rss

import (
	"os"
	"testing"
)

func TestReadings(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		if Current() != 0 || Peak() != 0 {
			t.Fatalf("want 0 without /proc, have %d, %d", Current(), Peak())
		}
		return
	}
	ResetPeak()
	cur, peak := Current(), Peak()
	if cur <= 0 || peak <= 0 {
		t.Fatalf("want positive readings, have VmRSS %d, VmHWM %d", cur, peak)
	}
	if cur%1024 != 0 {
		t.Fatalf("VmRSS %d is not whole kB", cur)
	}
	if status("NoSuchField") != 0 {
		t.Fatal("unknown field: want 0")
	}
}
