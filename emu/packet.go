package emu

import (
	"sync"
	"time"
	"unsafe"

	"github.com/inabox/inabox/internal/hugemem"
)

// DefaultHeadroom is the number of bytes kept free in front of a packet's data
// so that headers (or a backend's own header, such as a virtio-net header) can be
// prepended in place: what the real-time driver hands a backend's Write in front
// of each frame (writeOffset). Every queued frame carries it, so it is no larger:
// 700 k frames queued at line rate hold 67 MB less than with 128.
const DefaultHeadroom = 32

// DefaultMaxFrame is the largest frame a pooled buffer holds after its headroom:
// a 9000-byte jumbo MTU plus the Ethernet header, a VLAN tag and slack.
const DefaultMaxFrame = 9216

// Packet is one Ethernet frame in a buffer with headroom, plus a small
// value-type metadata header.
//
// A Packet has exactly one owner at a time. Whoever holds it either passes it
// on (Env.Send, Port writes, a link) or returns it with Pool.Put / Env.Free; it
// must not be touched after that. The data is Bytes(); Prepend grows it into the
// headroom without copying.
type Packet struct {
	buf      []byte // the buffer in use: headroom + room for the frame
	off, end int    // data is buf[off:end]
	// held are the packet's buffers by size class (its pool's classes; nil
	// until first needed): a packet starts in the smallest and moves up
	// the first time a frame needs more room, keeping what it has.
	held  [numClasses]*byte // first byte; the length is the pool's class size
	class int8
	// While the packet crosses a link in order: its link direction's epoch
	// when it was sent (gen) and whether it will arrive with a bad FCS
	// (fcs); next links it to the arrival after it, whose time and
	// sequence number are nextAt and nextSeq (its own are in the
	// scheduler's entry or in the packet before it), so that the scheduler
	// finds the next arrival's place without loading its packet.
	fcs     bool
	gen     uint32
	pool    *Pool
	next    *Packet // on its pool's free list, or its link direction's arrivals
	nextAt  int64
	nextSeq uint64

	// Port is the ingress port number of the node that received the packet.
	Port int
	// Arrival is when the packet arrived at that port, in run time.
	Arrival time.Duration
	// Sealed is set by a node that computed the frame's RoCE ICRC over its
	// current bytes, or deferred it (Defer): a receiver may trust the ICRC
	// of a sealed frame without recomputing it. The emulator clears it
	// whenever an impairment flips a bit, on Reset (so on every packet
	// from a Pool) and for every frame read from a real port; Pool.Clone
	// copies it. A node that changes a sealed frame's ICRC-covered bytes
	// must reseal it (write a correct ICRC), clear it, or leave it
	// deferred.
	Sealed bool

	// seal writes the frame's trailing check that its sender deferred
	// (Defer); nil when there is none to write.
	seal func(frame []byte)
}

// Defer marks the frame sealed (Sealed) with its trailing check, such as a
// RoCE ICRC, not written yet: fn writes it over the frame's bytes as they
// are when it runs (rdma.SealICRC). The emulator runs it (Finish) before
// the bytes are seen outside the nodes that accept deferred frames
// (DeferAware): before a capture, a bit flip by an impairment, a write to
// a real port or an external endpoint, a delivery to any other node, and a
// send with Sealed cleared. Elsewhere it never runs, so in virtual time a
// frame nobody inspects costs no check at all. A node that changes a
// deferred frame's bytes leaves it deferred: fn covers the new bytes.
// fn must be a function value that allocates nothing, not a closure made
// per frame.
func (p *Packet) Defer(fn func(frame []byte)) { p.seal, p.Sealed = fn, true }

// Deferred reports whether the frame's trailing check is still to be
// written (Defer).
func (p *Packet) Deferred() bool { return p.seal != nil }

// Finish writes the frame's deferred check (Defer) now; for a frame with
// none it does nothing.
func (p *Packet) Finish() {
	if fn := p.seal; fn != nil {
		p.seal = nil
		fn(p.Bytes())
	}
}

// Bytes returns the frame. The slice aliases the packet's buffer.
func (p *Packet) Bytes() []byte { return p.buf[p.off:p.end] }

// Len returns the frame length in bytes.
func (p *Packet) Len() int { return p.end - p.off }

// Headroom returns how many bytes can be prepended in place.
func (p *Packet) Headroom() int { return p.off }

// Tailroom returns how many bytes the frame can still grow at its end.
func (p *Packet) Tailroom() int { return p.cap() - p.end }

// cap is the buffer size the packet can grow to.
func (p *Packet) cap() int {
	if p.pool != nil {
		return max(p.pool.size, len(p.buf))
	}
	return len(p.buf)
}

// grow moves the frame (and its headroom) into the smallest of its pool's
// buffer classes that holds need bytes. Slices from Bytes before the call
// no longer alias the frame.
func (p *Packet) grow(need int) {
	if p.pool == nil {
		return
	}
	for c := int(p.class) + 1; c < numClasses; c++ {
		size := p.pool.classes[c]
		if size <= len(p.buf) || (size < need && c < numClasses-1) {
			continue
		}
		if p.held[c] == nil {
			p.held[c] = &make([]byte, size)[0]
		}
		b := unsafe.Slice(p.held[c], size)
		copy(b[:p.end], p.buf[:p.end])
		p.buf, p.class = b, int8(c)
		return
	}
}

// shrink moves an empty packet back to its smallest buffer.
func (p *Packet) shrink() {
	if p.class != 0 {
		p.buf, p.class = unsafe.Slice(p.held[0], p.pool.classes[0]), 0
	}
}

// Prepend extends the frame by n bytes at its front and returns them. It
// panics if n exceeds the headroom: size headroom for the deepest encapsulation.
func (p *Packet) Prepend(n int) []byte {
	if n > p.off {
		panic("emu: Prepend beyond headroom")
	}
	p.off -= n
	return p.buf[p.off : p.off+n]
}

// TrimFront removes n bytes from the front of the frame (they become headroom).
func (p *Packet) TrimFront(n int) {
	if n > p.Len() {
		panic("emu: TrimFront beyond frame")
	}
	p.off += n
}

// SetLen sets the frame length, keeping its start. It panics if n exceeds
// the pool's frame size. Growing past the packet's small buffer moves the
// frame: take Bytes after SetLen, not before.
func (p *Packet) SetLen(n int) {
	if n < 0 || p.off+n > p.cap() {
		panic("emu: SetLen out of range")
	}
	if p.off+n > len(p.buf) {
		p.grow(p.off + n)
	}
	p.end = p.off + n
}

// Reset empties the frame and restores the given headroom.
func (p *Packet) Reset(headroom int) {
	p.shrink()
	if headroom > len(p.buf) {
		headroom = len(p.buf)
	}
	p.off, p.end = headroom, headroom
	p.Port, p.Arrival, p.Sealed, p.seal = 0, 0, false, nil
}

// SetBytes replaces the frame with a copy of b, keeping the current headroom.
func (p *Packet) SetBytes(b []byte) {
	p.SetLen(len(b))
	copy(p.buf[p.off:p.end], b)
}

// Buffer returns the whole underlying buffer (the pool's full size) and the
// frame's offset in it, for backends that read or write in place. The frame
// is buf[off:off+Len()].
func (p *Packet) Buffer() (buf []byte, off int) {
	p.grow(p.cap())
	return p.buf, p.off
}

// SetFrame sets the frame to buf[off:off+n] of the packet's own buffer, as a
// backend does after reading into Buffer().
func (p *Packet) SetFrame(off, n int) {
	if off+n > len(p.buf) && off+n <= p.cap() {
		p.end = min(p.end, len(p.buf))
		p.grow(off + n)
	}
	if off < 0 || n < 0 || off+n > len(p.buf) {
		panic("emu: SetFrame out of range")
	}
	p.off, p.end = off, off+n
}

// Pool hands out Packets that hold frames up to one size. It is safe for
// concurrent use. Get and Put allocate nothing in steady state.
//
// A packet starts with a small buffer (headroom + SmallFrame) and moves to
// the next size class (headroom + MediumFrame, then the pool's full size)
// the first time a frame needs it (SetLen, SetFrame, Buffer), keeping the
// buffers it has: a run of small frames touches small buffers only.
//
// The pool makes packets in blocks (their small buffers in one allocation,
// advised for huge pages once large: internal/hugemem), each block twice the
// last up to maxPoolBlock, and keeps every packet returned to it on a free
// list, most recently returned first: a run's packets stay in memory for
// its next burst (a garbage-collected pool would drop them at each
// collection and touch fresh memory again).
type Pool struct {
	headroom int
	size     int // headroom + the largest frame
	classes  [numClasses]int
	mu       sync.Mutex
	free     *Packet // the free list, linked by Packet.next
	block    int     // packets in the next block
}

// The number of packets in a pool's first block and the most in one.
const (
	minPoolBlock = 64
	maxPoolBlock = 65536
)

// The frame sizes of a pool's buffer classes below its full size:
// SmallFrame holds an INA frame of 64 values (358 bytes) or a short RoCE
// frame,
// MediumFrame an Ethernet frame of a 1500-byte MTU with a VLAN tag.
const (
	SmallFrame  = 384
	MediumFrame = 1536
	numClasses  = 3
)

// NewPool returns a pool of packets with the given headroom and maximum frame
// size in bytes.
func NewPool(headroom, maxFrame int) *Pool {
	p := &Pool{headroom: headroom, size: headroom + maxFrame, block: minPoolBlock}
	p.classes = [numClasses]int{min(p.size, headroom+SmallFrame), min(p.size, headroom+MediumFrame), p.size}
	return p
}

// get takes a packet off the free list, making a block of them if it is
// empty.
func (pl *Pool) get() *Packet {
	pl.mu.Lock()
	if pl.free == nil {
		pl.refill()
	}
	p := pl.free
	pl.free, p.next = p.next, nil
	pl.mu.Unlock()
	return p
}

// refill puts a block of new packets on the free list; pl.mu is held.
func (pl *Pool) refill() {
	k := pl.block
	pl.block = min(2*k, maxPoolBlock)
	pks := hugemem.Make[Packet](k)
	c := pl.classes[0]
	slab := hugemem.Make[byte](k * c)
	for i := range pks {
		pk := &pks[i]
		pk.pool = pl
		pk.buf = slab[i*c : (i+1)*c : (i+1)*c]
		pk.held[0] = &pk.buf[0]
		pk.next = pl.free
		pl.free = pk
	}
}

// Headroom returns the headroom of packets from this pool.
func (pl *Pool) Headroom() int { return pl.headroom }

// MaxFrame returns the largest frame a packet from this pool holds.
func (pl *Pool) MaxFrame() int { return pl.size - pl.headroom }

// Get returns an empty packet with the pool's headroom. The caller owns it.
func (pl *Pool) Get() *Packet {
	p := pl.get()
	p.Reset(pl.headroom)
	return p
}

// Put returns a packet to the pool. The caller gives up ownership.
func (pl *Pool) Put(p *Packet) {
	if p == nil || p.pool == nil || p.pool.classes != pl.classes {
		return
	}
	p.pool = pl
	pl.mu.Lock()
	p.next = pl.free
	pl.free = p
	pl.mu.Unlock()
}

// Clone returns a copy of p from the pool, with the same headroom and metadata.
func (pl *Pool) Clone(p *Packet) *Packet { return cloneInto(pl.get(), p) }

// cloneInto makes c, a free packet, a copy of p.
func cloneInto(c, p *Packet) *Packet {
	c.shrink()
	c.off, c.end = 0, 0
	if p.off+p.Len() > len(c.buf) {
		c.grow(p.off + p.Len())
	}
	off := p.off
	if off > len(c.buf)-p.Len() {
		off = len(c.buf) - p.Len()
	}
	c.off, c.end = off, off+p.Len()
	copy(c.buf[c.off:c.end], p.Bytes())
	c.Port, c.Arrival, c.Sealed, c.seal = p.Port, p.Arrival, p.Sealed, p.seal
	return c
}

// take moves up to k packets off the free list (making a block if it is
// empty) and returns them as a list linked by next, with its length.
func (pl *Pool) take(k int) (*Packet, int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.free == nil {
		pl.refill()
	}
	head, n := pl.free, 1
	tail := head
	for n < k && tail.next != nil {
		tail = tail.next
		n++
	}
	pl.free, tail.next = tail.next, nil
	return head, n
}

// give puts a list of n packets of this pool, linked by next and ending at
// tail, back on the free list.
func (pl *Pool) give(head, tail *Packet) {
	pl.mu.Lock()
	tail.next = pl.free
	pl.free = head
	pl.mu.Unlock()
}

// cache is a network's own free list of its pool's packets, used only on
// the goroutine that runs the network (nodes' callbacks, links, the
// real-time loop), so taking and returning a packet there costs no lock: a
// locked pool was 11 % of a true-scale all-reduce's run. It trades packets
// with the pool cacheBatch at a time and gives back half when it holds
// more than cacheMax.
type cache struct {
	pool *Pool
	free *Packet
	n    int
}

const (
	cacheBatch = 64
	cacheMax   = 4096
)

func (c *cache) get() *Packet {
	if c.free == nil {
		c.free, c.n = c.pool.take(cacheBatch)
	}
	p := c.free
	c.free, p.next = p.next, nil
	c.n--
	p.Reset(c.pool.headroom)
	return p
}

func (c *cache) put(p *Packet) {
	if p == nil || p.pool != c.pool {
		c.pool.Put(p) // another pool's (or none): the pool decides
		return
	}
	p.next = c.free
	c.free = p
	if c.n++; c.n > cacheMax {
		tail := c.free
		for range cacheMax/2 - 1 {
			tail = tail.next
		}
		rest := tail.next
		tail.next = nil
		end := rest
		for end.next != nil {
			end = end.next
		}
		c.pool.give(rest, end)
		c.n = cacheMax / 2
	}
}

func (c *cache) clone(p *Packet) *Packet {
	if c.free == nil {
		c.free, c.n = c.pool.take(cacheBatch)
	}
	x := c.free
	c.free, x.next = x.next, nil
	c.n--
	return cloneInto(x, p)
}
