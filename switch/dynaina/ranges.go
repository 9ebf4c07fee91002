package dynaina

import (
	"fmt"
	"sort"
)

// Range is a contiguous run of aggregator slots [Base, Base+Slots).
type Range struct{ Base, Slots int }

// End returns the first slot after the range.
func (r Range) End() int { return r.Base + r.Slots }

// freeList is the switch memory not held by any pool: sorted, coalesced
// ranges.
type freeList struct {
	r []Range
}

func newFreeList(total int) *freeList { return &freeList{r: []Range{{0, total}}} }

// total returns the number of free slots.
func (f *freeList) total() int {
	n := 0
	for _, r := range f.r {
		n += r.Slots
	}
	return n
}

// largest returns the largest free range's size.
func (f *freeList) largest() int {
	m := 0
	for _, r := range f.r {
		m = max(m, r.Slots)
	}
	return m
}

// take carves n slots out of the smallest free range that holds them (best
// fit, which keeps large ranges for large pools).
func (f *freeList) take(n int) (Range, bool) {
	best := -1
	for i, r := range f.r {
		if r.Slots >= n && (best < 0 || r.Slots < f.r[best].Slots) {
			best = i
		}
	}
	if best < 0 || n <= 0 {
		return Range{}, false
	}
	got := Range{f.r[best].Base, n}
	f.r[best].Base += n
	f.r[best].Slots -= n
	if f.r[best].Slots == 0 {
		f.r = append(f.r[:best], f.r[best+1:]...)
	}
	return got, true
}

// takeAt carves exactly [base, base+n) if it is free (to grow a pool in
// place).
func (f *freeList) takeAt(base, n int) bool {
	for i, r := range f.r {
		if base >= r.Base && base+n <= r.End() {
			rest := []Range{}
			if base > r.Base {
				rest = append(rest, Range{r.Base, base - r.Base})
			}
			if base+n < r.End() {
				rest = append(rest, Range{base + n, r.End() - base - n})
			}
			f.r = append(f.r[:i], append(rest, f.r[i+1:]...)...)
			return true
		}
	}
	return false
}

// give returns a range to the free list, merging neighbours.
func (f *freeList) give(g Range) {
	if g.Slots <= 0 {
		return
	}
	f.r = append(f.r, g)
	sort.Slice(f.r, func(i, j int) bool { return f.r[i].Base < f.r[j].Base })
	out := f.r[:1]
	for _, r := range f.r[1:] {
		last := &out[len(out)-1]
		if last.End() == r.Base {
			last.Slots += r.Slots
		} else {
			out = append(out, r)
		}
	}
	f.r = out
}

// check reports an internal inconsistency (used by tests).
func (f *freeList) check(total int) error {
	for i, r := range f.r {
		if r.Slots <= 0 || r.Base < 0 || r.End() > total {
			return fmt.Errorf("free range %d %+v out of bounds", i, r)
		}
		if i > 0 && f.r[i-1].End() >= r.Base {
			return fmt.Errorf("free ranges %+v and %+v overlap or touch", f.r[i-1], r)
		}
	}
	return nil
}
