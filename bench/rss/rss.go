// Package rss reads the benchmarks' memory figures from the process's
// /proc/self/status (Linux): the resident set and its peak (VmHWM), which
// can be reset between measured passes. Where /proc is missing every
// reading is 0 and a reset does nothing.
package rss

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// ResetPeak resets the peak resident set (VmHWM) to the current one
// (/proc/self/clear_refs, value 5), so the next Peak is the next pass's.
func ResetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// Current returns the resident set (VmRSS) in bytes, or 0.
func Current() int64 { return status("VmRSS") }

// Peak returns the peak resident set (VmHWM) in bytes, or 0.
func Peak() int64 { return status("VmHWM") }

// status returns a kB field of /proc/self/status in bytes, or 0.
func status(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
