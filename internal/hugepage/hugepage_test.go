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
// pages only on request, the mapping of an array Advise was called on is
// hinted (VmFlags "hg" in /proc/self/smaps) and that of one it was not
// called on is not, nor backed by huge pages. The hinted array is backed
// by huge pages (AnonHugePages) unless the kernel says it fell back to
// small ones (thp_fault_fallback in /proc/vmstat: no free 2 MiB page, as
// under memory pressure), which is all a hint can promise. It runs first
// The arrays are fresh mappings of their own, not the heap's, which keeps
// the hints and the pages of the arrays it held before (-count=N).
func TestAdviseBacksLargeArraysWithHugePages(t *testing.T) {
	skipUnlessMadviseMode(t)
	plain := freshArray(t, 16*Size)
	for i := range plain {
		plain[i] = 1
	}
	advised := freshArray(t, 16*Size)
	fallbacks := thpFallbacks(t)
	Advise(advised)
	require.NotContains(t, smapsField(t, plain, "VmFlags:"), "hg", "the unhinted array's mapping is not hinted")
	require.Zero(t, hugeKiB(t, plain), "no huge pages without the hint (else the test shows nothing)")
	require.Contains(t, smapsField(t, advised, "VmFlags:"), "hg", "the hinted array's mapping is hinted")
	requireHugeUnlessFellBack(t, advised, fallbacks)
	runtime.KeepAlive(plain)
	runtime.KeepAlive(advised)
}

// skipUnlessMadviseMode skips the test unless transparent huge pages are
// given only on request (enabled "[madvise]"): under "always" an unhinted
// array may get them too, under "never" no array does.
func skipUnlessMadviseMode(t *testing.T) {
	t.Helper()
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") {
		t.Skipf("transparent huge pages not in madvise mode here (%q, %v)", mode, err)
	}
}

// thpFallbacks returns the kernel's count (all processes) of what leaves
// a hinted array without huge pages: a fault that asked for a transparent
// huge page and fell back to small pages (thp_fault_fallback, and
// thp_fault_fallback_charge when the memory cgroup refused it), or a huge
// page split after it was mapped (thp_split_pmd, thp_split_page: a
// partial unmap or madvise of the range, by the Go runtime's scavenger
// among others, splits it).
func thpFallbacks(t *testing.T) int {
	t.Helper()
	vmstat, err := os.ReadFile("/proc/vmstat")
	require.NoError(t, err)
	total, seen := 0, false
	for line := range strings.Lines(string(vmstat)) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		switch name {
		case "thp_fault_fallback", "thp_fault_fallback_charge", "thp_split_pmd", "thp_split_page":
			n, err := strconv.Atoi(v)
			require.NoError(t, err, "/proc/vmstat %q", line)
			total += n
			seen = seen || name == "thp_fault_fallback"
		}
	}
	if !seen {
		t.Fatal("/proc/vmstat has no thp_fault_fallback line")
	}
	return total
}

// requireHugeUnlessFellBack fails the test unless the hinted array b is
// backed by huge pages or the kernel counted a huge page fault falling
// back to small pages since thpFallbacks returned before: where the kernel
// has no free huge page (memory fragmented or short; how hard it tries
// first is transparent_hugepage/defrag), the hint cannot be kept.
func requireHugeUnlessFellBack(t *testing.T, b []byte, before int) {
	t.Helper()
	if hugeKiB(t, b) > 0 {
		return
	}
	after := thpFallbacks(t)
	require.Greater(t, after, before, "no huge pages with the hint, and the kernel counted no fallback to small pages and no split")
	defrag, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/defrag")
	t.Logf("the kernel fell back to small pages (thp_fault_fallback %d -> %d, defrag %q): a hint is not a promise", before, after, strings.TrimSpace(string(defrag)))
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
// huge pages unless the kernel fell back to small ones. It runs last in
// the package: the hints stay.
func TestAdviseHeapHintsTheMappingsTheHeapGrowsInto(t *testing.T) {
	skipUnlessMadviseMode(t)
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
	fallbacks := thpFallbacks(t)
	for i := range grown {
		grown[i] = 1
	}
	requireHugeUnlessFellBack(t, grown, fallbacks)
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
