//go:build linux

package procnode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inabox/inabox/emu"
)

// Ring geometry: 2 KiB frames (a 314-byte RoCE frame and up to ~2 KB
// frames fit), 64 KiB blocks, 2,048 frames per direction.
const (
	ringFrameSize = 2048
	ringBlockSize = 1 << 16
	ringBlocks    = 32
	ringFrames    = ringBlockSize / ringFrameSize * ringBlocks
	// ringTxData is where a TX frame's data starts in its slot:
	// TPACKET2_HDRLEN - sizeof(struct sockaddr_ll).
	ringTxData = 32
)

// RingPort is an emu.Port on an AF_PACKET socket with TPACKET_V2 RX and TX
// rings mapped into the process: a Read copies every frame the kernel has
// already placed in the RX ring without a system call (it polls only when
// the ring is empty), and a Write fills TX slots and kicks the kernel with
// one send per batch.
type RingPort struct {
	name   string
	file   *os.File
	rc     syscall.RawConn
	batch  int
	mem    []byte
	rx, tx []byte
	rxHead int // next RX slot to look at (reader only)
	txHead int // next TX slot to fill (writer only)
	closed atomic.Bool

	errClosed error

	rd struct {
		bufs  [][]byte
		sizes []int
		off   int
		n     int
		fn    func(fd uintptr) bool
	}
	wr struct {
		bufs [][]byte
		off  int
		n    int
		err  error
		fn   func(fd uintptr) bool
	}
}

var _ emu.Port = (*RingPort)(nil)

// NewRingPort opens an AF_PACKET socket with mapped rings on cfg.Dev.
func NewRingPort(cfg PacketConfig) (*RingPort, error) {
	fd, ifindex, fail, err := openPacketSocket("ring", cfg)
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, fail("PACKET_VERSION", err)
	}
	req := unix.TpacketReq{Block_size: ringBlockSize, Block_nr: ringBlocks, Frame_size: ringFrameSize, Frame_nr: ringFrames}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fail("PACKET_RX_RING", err)
	}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return nil, fail("PACKET_TX_RING", err)
	}
	size := 2 * ringBlockSize * ringBlocks
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fail("mmap", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Munmap(mem)
		return nil, fail("bind", err)
	}
	p := &RingPort{name: "ring:" + cfg.Dev, batch: cfg.BatchSize, mem: mem, rx: mem[:size/2], tx: mem[size/2:]}
	if p.batch <= 0 {
		p.batch = DefaultPacketBatch
	}
	p.file = os.NewFile(uintptr(fd), p.name)
	if p.rc, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		unix.Munmap(mem)
		return nil, err
	}
	p.errClosed = fmt.Errorf("procnode: %s: %w", p.name, net.ErrClosed)
	p.rd.fn = p.recv
	p.wr.fn = p.send
	return p, nil
}

func slotHdr(ring []byte, i int) *unix.Tpacket2Hdr {
	return (*unix.Tpacket2Hdr)(unsafe.Pointer(&ring[i*ringFrameSize]))
}

// Name returns "ring:<dev>".
func (p *RingPort) Name() string { return p.name }

// BatchSize returns the most frames one Read returns or one kick sends.
func (p *RingPort) BatchSize() int { return p.batch }

// Read implements emu.Port: it copies the frames waiting in the RX ring
// (up to len(bufs)) and waits in the netpoller only when there are none.
func (p *RingPort) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	r := &p.rd
	r.bufs, r.sizes, r.off, r.n = bufs[:min(len(bufs), p.batch)], sizes, offset, 0
	if p.recv(0) { // frames already there: no system call
		n := r.n
		r.bufs, r.sizes = nil, nil
		return n, nil
	}
	err := p.rc.Read(r.fn)
	n := r.n
	r.bufs, r.sizes = nil, nil
	if n > 0 {
		return n, nil
	}
	if err != nil {
		if p.closed.Load() || errors.Is(err, os.ErrClosed) {
			return 0, p.errClosed
		}
		return 0, fmt.Errorf("procnode: %s: %w", p.name, err)
	}
	return 0, nil
}

func (p *RingPort) recv(uintptr) bool {
	r := &p.rd
	for r.n < len(r.bufs) {
		h := slotHdr(p.rx, p.rxHead)
		st := atomic.LoadUint32(&h.Status)
		if st&unix.TP_STATUS_USER == 0 {
			break
		}
		size := int(h.Snaplen)
		base := p.rxHead * ringFrameSize
		if st&unix.TP_STATUS_COPY == 0 && size <= len(r.bufs[r.n])-r.off {
			copy(r.bufs[r.n][r.off:], p.rx[base+int(h.Mac):base+int(h.Mac)+size])
			r.sizes[r.n] = size
			r.n++
		}
		atomic.StoreUint32(&h.Status, unix.TP_STATUS_KERNEL)
		p.rxHead = (p.rxHead + 1) % ringFrames
	}
	return r.n > 0
}

// Write implements emu.Port: it fills free TX slots and kicks the kernel
// once per batch, waiting for slots when the ring is full.
func (p *RingPort) Write(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	w := &p.wr
	w.bufs, w.off, w.n, w.err = bufs, offset, 0, nil
	err := p.rc.Write(w.fn)
	n, werr := w.n, w.err
	w.bufs = nil
	if err == nil {
		err = werr
	}
	if err != nil {
		if p.closed.Load() || errors.Is(err, os.ErrClosed) {
			return n, p.errClosed
		}
		return n, err
	}
	return n, nil
}

func (p *RingPort) send(fd uintptr) bool {
	w := &p.wr
	for w.n < len(w.bufs) {
		queued := 0
		for w.n+queued < len(w.bufs) && queued < p.batch {
			h := slotHdr(p.tx, p.txHead)
			st := atomic.LoadUint32(&h.Status)
			if st != unix.TP_STATUS_AVAILABLE && st != unix.TP_STATUS_WRONG_FORMAT {
				break // ring full: kick what we have, then wait
			}
			f := w.bufs[w.n+queued][w.off:]
			if len(f) > ringFrameSize-ringTxData {
				w.err = fmt.Errorf("procnode: %s: %d-byte frame: %w", p.name, len(f), emu.ErrFrameTooLarge)
				break
			}
			base := p.txHead * ringFrameSize
			copy(p.tx[base+ringTxData:], f)
			h.Len = uint32(len(f))
			atomic.StoreUint32(&h.Status, unix.TP_STATUS_SEND_REQUEST)
			p.txHead = (p.txHead + 1) % ringFrames
			queued++
		}
		if queued > 0 {
			for {
				_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
				if e == unix.EINTR || e == errnoERESTARTSYS {
					continue
				}
				if e != 0 && e != unix.EAGAIN && e != unix.ENOBUFS {
					w.err = fmt.Errorf("procnode: %s: %w", p.name, os.NewSyscallError("sendto", e))
					return true
				}
				break
			}
			w.n += queued
		}
		if w.err != nil {
			return true
		}
		if queued == 0 {
			return false // wait for the kernel to free slots
		}
	}
	return true
}

// Close closes the socket and unmaps the rings.
func (p *RingPort) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return p.errClosed
	}
	err := p.file.Close()
	// The rings stay mapped until no Read or Write can touch them: Close
	// unblocks those, and the memory is released with the process.
	return err
}
