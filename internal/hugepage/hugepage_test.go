package hugepage

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestAdviseBacksLargeArraysWithHugePages: where the kernel gives huge
// pages on request, an array Advise was called on is backed by them
// (AnonHugePages of its mapping in /proc/self/smaps) and one it was not
// called on is not. It runs first in the package: memory once hinted stays
// hinted when the heap reuses it, so the unhinted array must come from
// memory no test has hinted.
func TestAdviseBacksLargeArraysWithHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") {
		t.Skipf("transparent huge pages not in madvise mode here (%q, %v)", mode, err)
	}
	plain := make([]byte, 16*Size)
	for i := range plain {
		plain[i] = 1
	}
	advised := make([]byte, 16*Size)
	Advise(advised)
	require.Zero(t, hugeKiB(t, plain), "no huge pages without the hint (else the test shows nothing)")
	require.Positive(t, hugeKiB(t, advised), "huge pages with the hint")
	runtime.KeepAlive(plain)
	runtime.KeepAlive(advised)
}

// TestAdviseKeepsTheArrayAndItsNeighbours: Advise leaves an array of any
// size zero and writable, and changes no byte of the memory around it.
func TestAdviseKeepsTheArrayAndItsNeighbours(t *testing.T) {
	for _, n := range []int{0, 1, 1000, Min/8 - 1, Min / 8, 3 * Size / 8, 5*Size/8 + 3} {
		buf := make([]uint64, n+2*Size/8)
		for i := range buf {
			buf[i] = uint64(i) | 1
		}
		s := make([]uint64, n, n+7)
		Advise(s)
		whole := s[:cap(s)]
		require.Equal(t, -1, slices.IndexFunc(whole, func(v uint64) bool { return v != 0 }), "n %d: not zero", n)
		for i := range whole {
			whole[i] = uint64(i)
		}
		for i, v := range buf {
			if v != uint64(i)|1 {
				t.Fatalf("n %d: neighbour element %d changed to %d", n, i, v)
			}
		}
		runtime.KeepAlive(buf)
	}
}

// hugeKiB returns the AnonHugePages (KiB) of the mapping holding b's
// first byte.
func hugeKiB(t *testing.T, b []byte) int {
	t.Helper()
	f := smapsField(t, b, "AnonHugePages:")
	require.NotEmpty(t, f, "no mapping holds the array, or it has no AnonHugePages line")
	kb, err := strconv.Atoi(f[0])
	require.NoError(t, err)
	return kb
}

// TestAdviseHeapHintsTheMappingsTheHeapGrowsInto: while AdviseHeap runs,
// a mapping the heap grows into for a large array nobody hinted is
// hinted (VmFlags "hg") before the array is touched, and is then backed by
// huge pages. It runs last in the package: the hints stay.
func TestAdviseHeapHintsTheMappingsTheHeapGrowsInto(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") {
		t.Skipf("transparent huge pages not in madvise mode here (%q, %v)", mode, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		AdviseHeap(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	grown := make([]byte, 64*Size) // more than the heap has free: new mappings
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Contains(smapsField(t, grown, "VmFlags:"), "hg") {
		if time.Now().After(deadline) {
			t.Fatalf("the heap's new mapping was not hinted: VmFlags %v", smapsField(t, grown, "VmFlags:"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range grown {
		grown[i] = 1
	}
	require.Positive(t, hugeKiB(t, grown), "huge pages once hinted")
	runtime.KeepAlive(grown)
}

// TestLargeAnonymousReadsPrivateWritableAnonymousMappings: only private
// writable anonymous mappings of at least a huge page are picked from
// /proc/self/maps text; other lines, and lines that do not parse, are
// skipped.
func TestLargeAnonymousReadsPrivateWritableAnonymousMappings(t *testing.T) {
	maps := `00400000-00c00000 r-xp 00000000 fd:01 1234 /usr/bin/verdryx
c000000000-c004000000 rw-p 00000000 00:00 0
c004000000-c008000000 ---p 00000000 00:00 0
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
7f0000200000-7f0000400000 rw-p 00000000 00:00 0
7f0000400000-7f0000800000 rw-p 00001000 fd:01 99 /data/file
7f0000800000-7f0000c00000 rw-s 00000000 00:01 7 /dev/zero (deleted)
7ffc00000000-7ffc00800000 rw-p 00000000 00:00 0 [stack]
zz-7f0000c00000 rw-p 00000000 00:00 0
7f0000c00000 rw-p 00000000 00:00 0
7f0001000000-7f0001400000 rw-p 00000000 00:00 0`
	got := largeAnonymous([]byte(maps), nil)
	require.Equal(t, []uint64{0xc000000000, 0xc004000000, 0x7f0000200000, 0x7f0000400000, 0x7f0001000000, 0x7f0001400000}, got)
}

// smapsField returns the fields of the line starting with name in the
// /proc/self/smaps entry of the mapping holding b's first byte.
func smapsField(t *testing.T, b []byte, name string) []string {
	t.Helper()
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x ", &lo, &hi); err == nil && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, name) {
			return strings.Fields(strings.TrimPrefix(line, name))
		}
	}
	require.NoError(t, sc.Err())
	return nil
}
