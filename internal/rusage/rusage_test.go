package rusage

import (
	"testing"
	"time"
)

// TestSelf: the process's CPU time grows by a fixed computation's (at
// least a millisecond, however busy the machine), and fresh pages touched
// count as minor faults.
func TestSelf(t *testing.T) {
	a, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	for range 20_000_000 { // about 20 ms
		x = x*6364136223846793005 + 1442695040888963407
	}
	mem := make([]byte, 64<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = byte(x)
	}
	b, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if b.CPU-a.CPU < time.Millisecond || b.MinorFaults <= a.MinorFaults {
		t.Errorf("after 20 M steps and 64 MiB touched: CPU %v → %v, minor faults %d → %d", a.CPU, b.CPU, a.MinorFaults, b.MinorFaults)
	}
}
