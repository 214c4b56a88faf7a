package hugepage

import (
	"bytes"
	"context"
	"runtime/metrics"
	"slices"
	"strconv"
	"time"
)

// Heap advice intervals: how often AdviseHeap looks at the runtime's
// mapped memory while it grows, and at most once it stops growing.
const (
	heapTickMin = 2 * time.Millisecond
	heapTickMax = 100 * time.Millisecond
)

// AdviseHeap hints, until ctx is done, that the process's anonymous
// writable mappings of at least Size bytes (the Go heap's arenas, which
// the runtime maps as the heap grows and never hints itself) be backed
// by transparent huge pages, where the kernel gives them only on request
// (Linux, transparent_hugepage/enabled "madvise"). A heap that grows to a
// gigabyte otherwise takes a page fault per 4 KiB on first touch: about
// 250,000 faults, which cost several microseconds each under a
// paravirtualised kernel (about a fifth of a 10 M-row `serve --once
// --replay`'s CPU on this project's VM).
//
// The runtime maps memory without telling anyone: AdviseHeap reads the
// memory it has mapped (runtime/metrics) every 2 ms while it grows, every
// 100 ms at most while it does not, and when it grew advises each such
// mapping of /proc/self/maps. Memory the heap touched before the advice
// stays in small pages. The advice is a hint: it changes nothing a program
// can observe, and nothing where the kernel does not support it. It
// blocks until ctx is done: run it in its own goroutine, once per process.
func AdviseHeap(ctx context.Context) {
	var buf []byte
	var last []uint64 // the advised ranges of the last look, lo and hi
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	var mapped uint64
	tick := heapTickMin
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // a runtime without the metric: no way to tell when to look
		}
		now := sample[0].Value.Uint64()
		if now <= mapped {
			tick = min(2*tick, heapTickMax)
			t.Reset(tick)
			continue
		}
		mapped, tick = now, heapTickMin
		var ok bool
		buf, ok = readMaps(buf)
		if !ok {
			return // no /proc: nothing to look at
		}
		ranges := largeAnonymous(buf, nil)
		if !slices.Equal(ranges, last) {
			for i := 0; i+1 < len(ranges); i += 2 {
				advise(uintptr(ranges[i]), uintptr(ranges[i+1]-ranges[i]))
			}
		}
		last = ranges
		t.Reset(tick)
	}
}

// largeAnonymous appends to dst, as lo, hi pairs, the private writable
// anonymous mappings of at least Size bytes in maps (the text of
// /proc/self/maps). Lines it cannot read are skipped.
func largeAnonymous(maps []byte, dst []uint64) []uint64 {
	for len(maps) > 0 {
		line := maps
		if i := bytes.IndexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		// lo-hi perms offset dev inode [path]
		f := bytes.Fields(line)
		if len(f) != 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue
		}
		dash := bytes.IndexByte(f[0], '-')
		if dash < 0 {
			continue
		}
		lo, err1 := strconv.ParseUint(string(f[0][:dash]), 16, 64)
		hi, err2 := strconv.ParseUint(string(f[0][dash+1:]), 16, 64)
		if err1 != nil || err2 != nil || hi < lo+Size {
			continue
		}
		dst = append(dst, lo, hi)
	}
	return dst
}
