package host

import "testing"

// TestCompact: a queue consumed from its head keeps its order and its
// array, and stops growing when pushes and pops keep pace.
func TestCompact(t *testing.T) {
	var q []int
	head, next, want := 0, 0, 0
	for step := 0; step < 100000; step++ {
		q = append(q, next)
		next++
		if step%2 == 1 || len(q)-head > 5000 { // the queue holds ≈ 5000
			for k := 0; k < 2 && head < len(q); k++ {
				if q[head] != want {
					t.Fatalf("step %d: popped %d, want %d", step, q[head], want)
				}
				head++
				want++
				q, head = Compact(q, head)
			}
		}
	}
	if cap(q) > 4*8192 {
		t.Errorf("the queue's array grew to %d for about 5000 entries", cap(q))
	}
	p := []*int{new(int), new(int), new(int)}
	p, h := Compact(p, 3)
	if len(p) != 0 || h != 0 || p[:3][0] != nil {
		t.Error("a fully consumed queue keeps references")
	}
}
