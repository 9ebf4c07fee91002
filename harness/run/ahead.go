package run

// aheadSpan is how many values of a large job's gradient a sender's
// prefetch makes at a time (256 KiB of float32). A variable for tests.
var aheadSpan = 1 << 16

// prefetcher makes the gradient values of a run's large (lazy) jobs ahead
// of their senders, on a goroutine of its own: the senders then copy
// values instead of generating them on the emulator's goroutine (a tenth
// of a true-scale run's CPU). The values are the same (the generator's,
// a pure function of the seed), so no output depends on it. The goroutine
// starts with the first request; stop ends it.
type prefetcher struct {
	reqs    chan aheadReq
	done    chan struct{}
	started bool
	free    [][]float32 // spans no slice holds
}

// aheadReq asks for values [off, off+len(buf)) of s into buf.
type aheadReq struct {
	s   *aheadSlice
	buf []float32
	off int
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
	var buf []float32
	if n := len(p.free); n > 0 {
		buf, p.free = p.free[n-1], p.free[:n-1]
	} else {
		buf = make([]float32, aheadSpan)
	}
	s.next, s.nextOff, s.pending = buf[:min(aheadSpan, s.n-off)], off, true
	p.reqs <- aheadReq{s: s, buf: s.next, off: off}
}

func (p *prefetcher) loop() {
	defer close(p.done)
	for r := range p.reqs {
		r.s.l.fill(r.buf, r.s.off+r.off)
		r.s.done <- struct{}{}
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
type aheadSlice struct {
	lazySlice
	pf                *prefetcher
	ready, next       []float32 // values [readyOff, …) and [nextOff, …)
	readyOff, nextOff int
	pending           bool // next is being made
	done              chan struct{}
	hi                int // the end of the furthest Fill
	inline            int // values made on the sender's goroutine
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
		case s.ready != nil && off >= s.readyOff && off < s.readyOff+len(s.ready):
			n := copy(dst, s.ready[off-s.readyOff:])
			dst, off = dst[n:], off+n
		case s.pending && off >= s.nextOff && off < s.nextOff+len(s.next):
			<-s.done
			s.pending = false
			if s.ready != nil {
				s.pf.free = append(s.pf.free, s.ready[:cap(s.ready)])
			}
			s.ready, s.readyOff, s.next = s.next, s.nextOff, nil
			if end := s.readyOff + len(s.ready); end < s.n {
				s.pf.request(s, end)
			}
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

// drop waits for the span being made, if any, and gives both back.
func (s *aheadSlice) drop() {
	if s.pending {
		<-s.done
		s.pending = false
		s.pf.free = append(s.pf.free, s.next[:cap(s.next)])
	}
	if s.ready != nil {
		s.pf.free = append(s.pf.free, s.ready[:cap(s.ready)])
	}
	s.ready, s.next = nil, nil
}
