package emu

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
)

// ErrFrameTooLarge is wrapped by the error a Port's Write returns for a frame
// longer than the backend's MaxFrame. Such a frame is refused whole (and counted
// in PortStats.TxOversize), never truncated.
var ErrFrameTooLarge = errors.New("frame larger than the port's maximum frame size")

// PortStats is a snapshot of a port backend's counters. Frames and bytes count
// Ethernet frames as the caller sees them (no backend headers).
type PortStats struct {
	// FramesRead and BytesRead count frames handed to the caller by Read.
	FramesRead, BytesRead uint64
	// FramesWritten and BytesWritten count frames Write accepted.
	FramesWritten, BytesWritten uint64
	// RxOversize counts received frames dropped because they were longer
	// than the caller's buffer after its offset.
	RxOversize uint64
	// RxForeign counts received frames dropped because they came from an
	// unexpected source (UDP: a datagram not sent from the remote address).
	RxForeign uint64
	// TxOversize counts frames Write refused with ErrFrameTooLarge.
	TxOversize uint64
}

// portCounters are the live counters behind PortStats. Each field is written
// by the one goroutine that owns the matching side (Read or Write) and read
// atomically by Stats.
type portCounters struct {
	framesRead, bytesRead       atomic.Uint64
	framesWritten, bytesWritten atomic.Uint64
	rxOversize, rxForeign       atomic.Uint64
	txOversize                  atomic.Uint64
}

func (c *portCounters) snapshot() PortStats {
	return PortStats{
		FramesRead:    c.framesRead.Load(),
		BytesRead:     c.bytesRead.Load(),
		FramesWritten: c.framesWritten.Load(),
		BytesWritten:  c.bytesWritten.Load(),
		RxOversize:    c.rxOversize.Load(),
		RxForeign:     c.rxForeign.Load(),
		TxOversize:    c.txOversize.Load(),
	}
}

// MemMaxFrame is the largest frame a MemPort carries.
const MemMaxFrame = 65535

// Defaults of NewMemPipe for arguments that are zero or negative.
const (
	DefaultMemBatch = 64
	DefaultMemDepth = 8
)

// memBatch is one batch of frames in flight between the two ends of a pipe.
// Exactly one party owns it at a time: the free list, the writer filling it,
// the full queue, or the reader draining it.
type memBatch struct {
	frames [][]byte // frames[:n] hold frame data; buffers are reused across trips
	n      int
}

// memDir is one direction of a pipe.
type memDir struct {
	full chan *memBatch // filled batches, in order; capacity = depth
	free chan *memBatch // empty batches for reuse; never blocks (capacity = depth+2)
}

var memPipeSeq atomic.Uint64

// MemPort is one end of an in-memory pipe made by NewMemPipe.
//
// Write copies each frame into a batch buffer owned by the pipe and queues the
// batch; Read copies frames out of it into the caller's buffers and recycles
// the batch. So the caller owns its buffers before, during and after both
// calls, and the pipe keeps no reference to them. After warm-up (at most
// depth+2 batches per direction and buffer growth to the largest frame seen)
// the pipe allocates nothing.
//
// Back-pressure: a direction holds at most depth queued batches; a Write that
// finds the queue full blocks until the peer reads (frames are never dropped).
// All blocking is on channels, so a MemPort works inside a testing/synctest
// bubble.
//
// Closing: after Close, Read and Write on that end return an error wrapping
// net.ErrClosed and a blocked Read or Write returns with it. The peer then
// reads the frames still queued and gets io.EOF, and its Write fails with an
// error wrapping io.ErrClosedPipe, as with net.Pipe.
type MemPort struct {
	name     string
	batch    int
	tx, rx   *memDir
	done     chan struct{} // closed by Close
	peerDone chan struct{} // the peer's done
	closed   atomic.Bool

	// Read side only.
	cur *memBatch
	pos int

	errClosed, errEOF, errPeer error
	stats                      portCounters
}

var _ Port = (*MemPort)(nil)

// NewMemPipe returns two connected in-memory ports: frames written on a are
// read on b and frames written on b are read on a, in order. batchSize is the
// BatchSize of both ends and depth the number of batches each direction
// queues before Write blocks; zero or negative values select
// DefaultMemBatch and DefaultMemDepth.
func NewMemPipe(batchSize, depth int) (a, b *MemPort) {
	if batchSize <= 0 {
		batchSize = DefaultMemBatch
	}
	if depth <= 0 {
		depth = DefaultMemDepth
	}
	ab := &memDir{full: make(chan *memBatch, depth), free: make(chan *memBatch, depth+2)}
	ba := &memDir{full: make(chan *memBatch, depth), free: make(chan *memBatch, depth+2)}
	doneA, doneB := make(chan struct{}), make(chan struct{})
	id := strconv.FormatUint(memPipeSeq.Add(1), 10)
	a = newMemPort("mem:"+id+"a", batchSize, ab, ba, doneA, doneB)
	b = newMemPort("mem:"+id+"b", batchSize, ba, ab, doneB, doneA)
	return a, b
}

func newMemPort(name string, batch int, tx, rx *memDir, done, peerDone chan struct{}) *MemPort {
	return &MemPort{
		name: name, batch: batch, tx: tx, rx: rx, done: done, peerDone: peerDone,
		errClosed: fmt.Errorf("emu: %s: %w", name, net.ErrClosed),
		errEOF:    io.EOF,
		errPeer:   fmt.Errorf("emu: %s: peer closed: %w", name, io.ErrClosedPipe),
	}
}

// Name returns "mem:<n>a" or "mem:<n>b".
func (p *MemPort) Name() string { return p.name }

// BatchSize returns the batch size given to NewMemPipe.
func (p *MemPort) BatchSize() int { return p.batch }

// MaxFrame returns MemMaxFrame, the largest frame Write accepts.
func (p *MemPort) MaxFrame() int { return MemMaxFrame }

// Stats returns a snapshot of the port's counters. It is safe to call
// concurrently with Read and Write.
func (p *MemPort) Stats() PortStats { return p.stats.snapshot() }

// Write copies bufs[i][offset:] for each i into the pipe, blocking while the
// peer's queue is full. len(bufs) may exceed BatchSize; the frames are then
// queued as several batches. It returns how many frames were queued; a short
// count comes with an error: ErrFrameTooLarge (wrapped) for a frame longer
// than MemMaxFrame, net.ErrClosed (wrapped) after Close, io.ErrClosedPipe
// (wrapped) after the peer's Close. Write never retains bufs.
func (p *MemPort) Write(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	sent := 0
	for sent < len(bufs) {
		b := p.getBatch()
		var err error
		k := 0
		for k < p.batch && sent+k < len(bufs) {
			f := bufs[sent+k][offset:]
			if len(f) > MemMaxFrame {
				p.stats.txOversize.Add(1)
				err = fmt.Errorf("emu: %s: %d-byte frame: %w", p.name, len(f), ErrFrameTooLarge)
				break
			}
			dst := b.frames[k]
			if cap(dst) < len(f) {
				dst = make([]byte, len(f), max(len(f), 2048))
			}
			dst = dst[:len(f)]
			copy(dst, f)
			b.frames[k] = dst
			k++
		}
		b.n = k
		if k > 0 {
			select {
			case <-p.peerDone: // checked first: a send into a dead pipe must fail
				p.putBatch(b)
				return sent, p.errPeer
			default:
			}
			select {
			case p.tx.full <- b: // fast path: room in the queue
			default:
				select {
				case p.tx.full <- b:
				case <-p.done:
					p.putBatch(b)
					return sent, p.errClosed
				case <-p.peerDone:
					p.putBatch(b)
					return sent, p.errPeer
				}
			}
			var nb uint64
			for _, f := range b.frames[:k] {
				nb += uint64(len(f))
			}
			p.stats.framesWritten.Add(uint64(k))
			p.stats.bytesWritten.Add(nb)
			sent += k
		} else {
			p.putBatch(b)
		}
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// getBatch takes an empty batch for writing, allocating one only while the
// pipe warms up.
func (p *MemPort) getBatch() *memBatch {
	select {
	case b := <-p.tx.free:
		return b
	default:
		return &memBatch{frames: make([][]byte, p.batch)}
	}
}

// putBatch returns a batch of direction tx to its free list.
func (p *MemPort) putBatch(b *memBatch) {
	b.n = 0
	select {
	case p.tx.free <- b:
	default: // cannot happen: free has room for every batch of the direction
	}
}

// Read blocks until a frame is queued, then copies up to len(bufs) frames
// into bufs[i][offset:], sets sizes[i] to their lengths and returns how many.
// A frame longer than len(bufs[i])-offset is dropped and counted in
// PortStats.RxOversize. Read keeps no reference to bufs after it returns.
func (p *MemPort) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	if len(bufs) == 0 {
		return 0, nil
	}
	n := 0
	var nb uint64
fill:
	for {
		if p.cur == nil {
			select {
			case b := <-p.rx.full: // fast path: a batch is waiting
				p.cur, p.pos = b, 0
			default:
				if n > 0 {
					break fill // deliver what we have rather than wait
				}
				select {
				case b := <-p.rx.full:
					p.cur, p.pos = b, 0
				case <-p.done:
					return 0, p.errClosed
				case <-p.peerDone:
					select {
					case b := <-p.rx.full:
						p.cur, p.pos = b, 0
					default:
						return 0, p.errEOF
					}
				}
			}
		}
		b := p.cur
		for n < len(bufs) && p.pos < b.n {
			f := b.frames[p.pos]
			p.pos++
			dst := bufs[n][offset:]
			if len(f) > len(dst) {
				p.stats.rxOversize.Add(1)
				continue
			}
			sizes[n] = copy(dst, f)
			nb += uint64(len(f))
			n++
		}
		if p.pos == b.n {
			p.cur = nil
			b.n = 0
			select {
			case p.rx.free <- b:
			default:
			}
		}
		if n == len(bufs) {
			break
		}
	}
	p.stats.framesRead.Add(uint64(n))
	p.stats.bytesRead.Add(nb)
	return n, nil
}

// Close closes this end of the pipe and unblocks its pending Read and Write.
// Closing twice returns an error wrapping net.ErrClosed.
func (p *MemPort) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return p.errClosed
	}
	close(p.done)
	return nil
}
