package hugemem

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

func TestAlignedRange(t *testing.T) {
	const M = 1 << 20
	for _, c := range []struct{ p, size, off, n uintptr }{
		{0, 4 * M, 0, 4 * M},
		{M, 4 * M, M, 2 * M}, // [1M,5M) holds [2M,4M)
		{M, 2 * M, 0, 0},     // [1M,3M) holds no aligned 2 MiB
		{2*M - 8192, 2*M + 8192, 8192, 2 * M},
		{3 * M, M, 0, 0},
	} {
		off, n := alignedRange(c.p, c.size, hugePage)
		if off != c.off || n != c.n {
			t.Errorf("alignedRange(%#x, %#x) = %#x, %#x; want %#x, %#x", c.p, c.size, off, n, c.off, c.n)
		}
		if n > 0 && ((c.p+off)%hugePage != 0 || n%hugePage != 0 || off+n > c.size) {
			t.Errorf("alignedRange(%#x, %#x): [%#x, +%#x) is not aligned inside", c.p, c.size, c.p+off, n)
		}
	}
}

// TestMake checks that Make returns zeroed memory of the asked length, and,
// where the kernel offers transparent huge pages on madvise, that a large
// allocation touched after Make is (at least partly) backed by huge pages.
func TestMake(t *testing.T) {
	if s := Make[uint64](10); len(s) != 10 || s[9] != 0 {
		t.Fatalf("Make(10) = len %d", len(s))
	}
	if s := Make[int32](0); len(s) != 0 {
		t.Fatal("Make(0) not empty")
	}
	b := Make[byte](16 << 20)
	for i := range b {
		if b[i] != 0 {
			t.Fatalf("byte %d = %d, want 0", i, b[i])
		}
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !(strings.Contains(string(mode), "[madvise]") || strings.Contains(string(mode), "[always]")) {
		t.Skipf("transparent huge pages not offered here (%q, %v): the advice has no effect to check", mode, err)
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	off, _ := alignedRange(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), hugePage)
	if !hugeBacked(string(smaps), uintptr(unsafe.Pointer(&b[off]))) {
		t.Error("a 16 MiB Make, touched, has no huge page in its mapping")
	}
}

// hugeBacked reports whether the mapping holding addr in an smaps dump has
// a non-zero AnonHugePages.
func hugeBacked(smaps string, addr uintptr) bool {
	in := false
	for _, line := range strings.Split(smaps, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			var lo, hi uintptr
			if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err == nil {
				in = lo <= addr && addr < hi
			}
			continue
		}
		if in && len(f) >= 2 && f[0] == "AnonHugePages:" {
			return f[1] != "0"
		}
	}
	return false
}
