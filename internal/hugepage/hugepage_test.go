package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestAdviseGivesHugePages: on Linux with transparent huge pages in
// "madvise" or "always" mode, an advised 16 MiB table written after the
// advice is backed (at least in part) by huge pages. Elsewhere the test is
// skipped.
func TestAdviseGivesHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skip("no transparent huge pages here")
	}
	// Two tries: a kernel short of free 2 MiB blocks may back the first
	// table with small pages.
	var kb int
	for try := 0; try < 2 && kb == 0; try++ {
		advised := make([]uint64, 16<<20/8)
		Advise(advised)
		for i := range advised {
			advised[i] = uint64(i)
		}
		var err error
		kb, err = anonHugeKB(uintptr(unsafe.Pointer(&advised[len(advised)/2])))
		if err != nil {
			t.Fatal(err)
		}
	}
	if kb == 0 {
		t.Fatalf("advised table has no huge pages (THP mode %q)", strings.TrimSpace(string(mode)))
	}
	small := make([]byte, Min-1)
	Advise(small) // below Min: nothing to do, must not panic
	Advise([]uint64(nil))
}

// anonHugeKB returns the AnonHugePages of the mapping holding addr, from
// /proc/self/smaps.
func anonHugeKB(addr uintptr) (int, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			var kb int
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, "AnonHugePages:"), "%d", &kb); err != nil {
				return 0, err
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("no mapping holds %#x", addr)
}
