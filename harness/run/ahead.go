package run

import "github.com/inabox/inabox/host"

// aheadSpan is how many values of a large job's gradient a sender's
// prefetch makes at a time (256 KiB of float32). A variable for tests.
var aheadSpan = 1 << 16

// prefetcher makes the gradient values of a run's large (lazy) jobs ahead
// of their senders, on a goroutine of its own: the senders then copy
// values instead of generating them on the emulator's goroutine (a tenth
// of a true-scale run's CPU), and, once a sender has asked for them
// (host.WireSource), the values' wire form too, quantized as its worker
// plans (another tenth). The values and bytes are the same (the
// generator's, a pure function of the seed, and host.WirePlan.Quantize, a
// pure function of them), so no output depends on it. The goroutine
// starts with the first request; stop ends it.
type prefetcher struct {
	reqs     chan aheadReq
	done     chan struct{}
	started  bool
	free     [][]float32 // spans no slice holds
	freeWire [][]byte    // wire spans no slice holds
	freeClip [][]int32   // and their clipped counts
}

// aheadReq asks for values [off, off+len(buf)) of s into buf and, if wire
// is not nil, their wire form into wire and clip (off is a chunk's first).
type aheadReq struct {
	s    *aheadSlice
	buf  []float32
	off  int
	wire []byte
	clip []int32
}

// madeSpan is a part of a slice's values made ahead: values [off,
// off+len(vals)), and their wire form if wire is not nil.
type madeSpan struct {
	vals []float32
	off  int
	wire []byte
	clip []int32 // a clipped count per chunk
}

func (p *prefetcher) request(s *aheadSlice, off int) {
	if !p.started {
		p.started = true
		p.reqs, p.done = make(chan aheadReq, 64), make(chan struct{})
		go p.loop()
	}
	if s.done == nil {
		s.done = make(chan struct{}, 1)
	}
	// The pools' buffers are those of earlier spans, whose length may
	// differ (it follows each slice's chunks): one too short is dropped.
	n := min(s.spanLen(), s.n-off)
	var buf []float32
	if k := len(p.free); k > 0 {
		buf, p.free = p.free[k-1], p.free[:k-1]
	}
	if cap(buf) < n {
		buf = make([]float32, s.spanLen())
	}
	sp := madeSpan{vals: buf[:n], off: off}
	if s.wire {
		V := s.plan.Values
		var w []byte
		var c []int32
		if k := len(p.freeWire); k > 0 {
			w, p.freeWire = p.freeWire[k-1], p.freeWire[:k-1]
			c, p.freeClip = p.freeClip[k-1], p.freeClip[:k-1]
		}
		if cap(w) < 4*n || cap(c) < (n+V-1)/V {
			w, c = make([]byte, 4*s.spanLen()), make([]int32, (s.spanLen()+V-1)/V)
		}
		sp.wire, sp.clip = w[:4*n], c[:(n+V-1)/V]
	}
	s.next, s.pending = sp, true
	p.reqs <- aheadReq{s: s, buf: sp.vals, off: off, wire: sp.wire, clip: sp.clip}
}

func (p *prefetcher) loop() {
	defer close(p.done)
	for r := range p.reqs {
		r.s.l.fill(r.buf, r.s.off+r.off)
		if r.wire != nil {
			r.s.plan.Quantize(r.wire, r.clip, r.buf, uint32(r.off/r.s.plan.Values))
		}
		r.s.done <- struct{}{}
	}
}

// give takes back the buffers of sp.
func (p *prefetcher) give(sp madeSpan) {
	if sp.vals != nil {
		p.free = append(p.free, sp.vals[:cap(sp.vals)])
	}
	if sp.wire != nil {
		p.freeWire, p.freeClip = append(p.freeWire, sp.wire[:cap(sp.wire)]), append(p.freeClip, sp.clip[:cap(sp.clip)])
	}
}

// stop ends the goroutine, if it started, once it has made what was asked.
func (p *prefetcher) stop() {
	if p != nil && p.started {
		close(p.reqs)
		<-p.done
		p.started = false
	}
}

// aheadSlice is a lazySlice whose values the prefetcher makes a span
// ahead of the sender: Fill copies them from the span made (ready), and
// asks for the next span when it moves into it. A Fill behind the furthest
// value filled so far (a chunk sent again) makes its values itself; one
// the spans do not cover starts the prefetch again from its end.
//
// It is a host.WireSource: FillWire does the same with the values' wire
// form, which the spans carry from the first FillWire on (that one reports
// false: the worker quantizes; a span made before without it is quantized
// on the sender's goroutine as it is used).
type aheadSlice struct {
	lazySlice
	pf            *prefetcher
	ready, next   madeSpan
	pending       bool // next is being made
	done          chan struct{}
	hi            int // the end of the furthest Fill or FillWire
	inline        int // values made on the sender's goroutine
	inlineWire    int // values quantized on the sender's goroutine
	plan          host.WirePlan
	planned, wire bool // PlanWire was called; spans carry the wire form
	scratch       []float32
}

// spanLen is how many values a span holds: aheadSpan, rounded down to whole
// chunks once the worker planned them (at least one).
func (s *aheadSlice) spanLen() int {
	if !s.planned {
		return aheadSpan
	}
	return max(aheadSpan/s.plan.Values, 1) * s.plan.Values
}

// PlanWire implements host.WireSource.
func (s *aheadSlice) PlanWire(p host.WirePlan) { s.plan, s.planned = p, true }

// advance makes next, once made, the ready span and asks for the one after.
func (s *aheadSlice) advance() {
	<-s.done
	s.pending = false
	s.pf.give(s.ready)
	s.ready, s.next = s.next, madeSpan{}
	if end := s.ready.off + len(s.ready.vals); end < s.n {
		s.pf.request(s, end)
	}
}

func (s *aheadSlice) Fill(dst []float32, off int) {
	if off < s.hi {
		s.lazySlice.Fill(dst, off)
		s.inline += len(dst)
		return
	}
	s.hi = off + len(dst)
	for len(dst) > 0 {
		switch {
		case s.ready.vals != nil && off >= s.ready.off && off < s.ready.off+len(s.ready.vals):
			n := copy(dst, s.ready.vals[off-s.ready.off:])
			dst, off = dst[n:], off+n
		case s.pending && off >= s.next.off && off < s.next.off+len(s.next.vals):
			s.advance()
		default: // not made ahead: from here on
			s.drop()
			s.lazySlice.Fill(dst, off)
			s.inline += len(dst)
			if end := off + len(dst); end < s.n {
				s.pf.request(s, end)
			}
			dst = nil
		}
	}
	if s.hi == s.n {
		s.drop() // the last value is out: the spans go back
	}
}

// FillWire implements host.WireSource.
func (s *aheadSlice) FillWire(wire []byte, clip []int32, k uint32) bool {
	if !s.planned || len(wire) == 0 {
		return false
	}
	V := s.plan.Values
	off := int(k) * V
	if !s.wire { // the first call: spans carry the wire form from now on
		s.wire = true
		return false
	}
	if off < s.hi || off+len(wire)/4 > s.n {
		return false
	}
	s.hi = off + len(wire)/4
	for len(wire) > 0 {
		switch r := &s.ready; {
		case r.vals != nil && off >= r.off && off < r.off+len(r.vals):
			i := off - r.off
			n := min(len(wire)/4, len(r.vals)-i)
			if r.wire != nil {
				copy(wire, r.wire[4*i:4*(i+n)])
				copy(clip, r.clip[i/V:(i+n+V-1)/V])
			} else { // made before the wire was asked for
				s.plan.Quantize(wire, clip, r.vals[i:i+n], uint32(off/V))
				s.inlineWire += n
			}
			wire, clip, off = wire[4*n:], clip[(n+V-1)/V:], off+n
		case s.pending && off >= s.next.off && off < s.next.off+len(s.next.vals):
			s.advance()
		default: // not made ahead: from here on
			s.drop()
			n := len(wire) / 4
			if cap(s.scratch) < n {
				s.scratch = make([]float32, n)
			}
			s.lazySlice.Fill(s.scratch[:n], off)
			s.plan.Quantize(wire, clip, s.scratch[:n], uint32(off/V))
			s.inline += n
			s.inlineWire += n
			if end := off + n; end < s.n {
				s.pf.request(s, end)
			}
			wire = nil
		}
	}
	if s.hi == s.n {
		s.drop()
	}
	return true
}

// drop waits for the span being made, if any, and gives both back.
func (s *aheadSlice) drop() {
	if s.pending {
		<-s.done
		s.pending = false
		s.pf.give(s.next)
	}
	s.pf.give(s.ready)
	s.ready, s.next = madeSpan{}, madeSpan{}
}
