package emu

import "testing"

// TestCacheTrades: the network's packet cache hands out distinct, reset
// packets, trades them with the pool in batches (giving back half when it
// holds too many, without losing any), and sends a foreign packet to the
// pool's own rules.
func TestCacheTrades(t *testing.T) {
	pl := NewPool(DefaultHeadroom, DefaultMaxFrame)
	c := &cache{pool: pl}
	const n = 3*cacheMax + 17
	seen := map[*Packet]bool{}
	var ps []*Packet
	for i := 0; i < n; i++ {
		p := c.get()
		if seen[p] || p.Len() != 0 || p.Headroom() != DefaultHeadroom || p.next != nil {
			t.Fatalf("packet %d: reused while held (%t), len %d, headroom %d", i, seen[p], p.Len(), p.Headroom())
		}
		seen[p] = true
		p.SetLen(100)
		ps = append(ps, p)
	}
	for _, p := range ps {
		c.put(p)
		if c.n > cacheMax {
			t.Fatalf("cache holds %d > %d", c.n, cacheMax)
		}
	}
	count := func(p *Packet) int {
		k := 0
		for ; p != nil; p = p.next {
			k++
		}
		return k
	}
	if k := count(c.free); k != c.n {
		t.Fatalf("cache list %d, count %d", k, c.n)
	}
	pl.mu.Lock()
	inPool := count(pl.free)
	pl.mu.Unlock()
	if c.n+inPool < n {
		t.Fatalf("%d packets lost: %d cached + %d pooled < %d made", n-c.n-inPool, c.n, inPool, n)
	}
	// A packet of another pool with the same classes joins this pool (as
	// Pool.Put does); a clone copies bytes and metadata.
	other := NewPool(DefaultHeadroom, DefaultMaxFrame).Get()
	c.put(other)
	if other.pool != pl {
		t.Fatal("a foreign packet was not adopted by the pool")
	}
	src := c.get()
	src.SetBytes([]byte{1, 2, 3})
	src.Sealed, src.Port = true, 4
	cl := c.clone(src)
	if string(cl.Bytes()) != "\x01\x02\x03" || !cl.Sealed || cl.Port != 4 || cl == src {
		t.Fatalf("clone: %v sealed %t port %d", cl.Bytes(), cl.Sealed, cl.Port)
	}
	if a := testing.AllocsPerRun(100, func() { c.put(c.get()) }); a != 0 {
		t.Fatalf("%v allocations per get/put", a)
	}
}
