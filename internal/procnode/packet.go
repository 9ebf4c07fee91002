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

// DefaultPacketBatch is the default PacketConfig.BatchSize.
const DefaultPacketBatch = 64

// errnoERESTARTSYS is a kernel-internal errno seen leaking from
// recvmmsg/sendmmsg on this kind of VM; it means "try again".
const errnoERESTARTSYS = syscall.Errno(512)

// PacketConfig configures NewPacketPort.
type PacketConfig struct {
	// Dev is the interface to bind to (in the caller's namespace).
	Dev string
	// BatchSize is the most frames one recvmmsg/sendmmsg moves; 0 means
	// DefaultPacketBatch; 1 makes one system call per frame.
	BatchSize int
	// QdiscBypass sets PACKET_QDISC_BYPASS: frames go straight to the
	// driver, skipping the device's queueing discipline.
	QdiscBypass bool
}

// PacketPort is an emu.Port on an AF_PACKET SOCK_RAW socket bound to one
// interface: whole Ethernet frames in and out, up to BatchSize per
// recvmmsg/sendmmsg. Frames the socket itself sends are not read back
// (PACKET_IGNORE_OUTGOING). The socket lives in the namespace of the thread
// that opened it.
type PacketPort struct {
	name   string
	file   *os.File
	rc     syscall.RawConn
	batch  int
	closed atomic.Bool
	pollFd int // ≥ 0 once PollFd moved the socket out of the Go netpoller

	RxPackets, TxPackets, RxTrunc atomic.Uint64

	errClosed error

	rd struct {
		hdrs  []unix.Mmsghdr
		iovs  []unix.Iovec
		bufs  [][]byte
		sizes []int
		off   int
		n     int
		err   error
		fn    func(fd uintptr) bool
	}
	wr struct {
		hdrs []unix.Mmsghdr
		iovs []unix.Iovec
		bufs [][]byte
		off  int
		n    int
		err  error
		fn   func(fd uintptr) bool
	}
}

var _ emu.PollPort = (*PacketPort)(nil)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacketSocket opens a non-blocking AF_PACKET socket for cfg.Dev that
// ignores its own outgoing frames (and bypasses the qdisc if asked), and
// returns it with the interface index to bind to. kind ("packet", "ring")
// prefixes errors; fail closes the socket and wraps an error of a later
// step the same way.
func openPacketSocket(kind string, cfg PacketConfig) (fd, ifindex int, fail func(what string, err error) error, err error) {
	ifi, err := net.InterfaceByName(cfg.Dev)
	if err != nil {
		return -1, 0, nil, fmt.Errorf("procnode: %s %s: %w", kind, cfg.Dev, err)
	}
	fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, nil, fmt.Errorf("procnode: %s %s: socket: %w", kind, cfg.Dev, err)
	}
	fail = func(what string, err error) error {
		unix.Close(fd)
		return fmt.Errorf("procnode: %s %s: %s: %w", kind, cfg.Dev, what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return -1, 0, nil, fail("PACKET_IGNORE_OUTGOING", err)
	}
	if cfg.QdiscBypass {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return -1, 0, nil, fail("PACKET_QDISC_BYPASS", err)
		}
	}
	return fd, ifi.Index, fail, nil
}

// NewPacketPort opens an AF_PACKET socket on cfg.Dev. It needs CAP_NET_RAW.
func NewPacketPort(cfg PacketConfig) (*PacketPort, error) {
	fd, ifindex, fail, err := openPacketSocket("packet", cfg)
	if err != nil {
		return nil, err
	}
	// Big buffers: a burst of results must not overflow the socket.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		return nil, fail("bind", err)
	}
	p := &PacketPort{name: "packet:" + cfg.Dev, batch: cfg.BatchSize, pollFd: -1}
	if p.batch <= 0 {
		p.batch = DefaultPacketBatch
	}
	p.file = os.NewFile(uintptr(fd), "packet:"+cfg.Dev) // registers with the netpoller (fd is non-blocking)
	if p.rc, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		return nil, err
	}
	p.errClosed = fmt.Errorf("procnode: %s: %w", p.name, net.ErrClosed)
	p.rd.hdrs = make([]unix.Mmsghdr, p.batch)
	p.rd.iovs = make([]unix.Iovec, p.batch)
	p.wr.hdrs = make([]unix.Mmsghdr, p.batch)
	p.wr.iovs = make([]unix.Iovec, p.batch)
	p.rd.fn = p.recv
	p.wr.fn = p.send
	return p, nil
}

// Name returns "packet:<dev>".
func (p *PacketPort) Name() string { return p.name }

// BatchSize returns the most frames one system call moves.
func (p *PacketPort) BatchSize() int { return p.batch }

// Read implements emu.Port with one recvmmsg per call (after waiting in the
// netpoller for the first frame). Oversize frames are dropped and counted.
func (p *PacketPort) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	return p.read(bufs, sizes, offset, true)
}

// read is Read (wait: in the netpoller until a frame is there) and
// TryRead (one recvmmsg on the polled fd).
func (p *PacketPort) read(bufs [][]byte, sizes []int, offset int, wait bool) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	m := min(len(bufs), p.batch)
	if m == 0 {
		return 0, nil
	}
	r := &p.rd
	r.bufs, r.sizes, r.off, r.n, r.err = bufs[:m], sizes, offset, 0, nil
	var err error
	if wait {
		err = p.rc.Read(r.fn)
	} else {
		p.recv(uintptr(p.pollFd))
	}
	n, rerr := r.n, r.err
	r.bufs, r.sizes = nil, nil
	for i := range r.iovs {
		r.iovs[i].Base = nil
	}
	if err == nil {
		err = rerr
	}
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

func (p *PacketPort) recv(fd uintptr) bool {
	r := &p.rd
	m := len(r.bufs)
	for i := 0; i < m; i++ {
		room := r.bufs[i][r.off:]
		r.iovs[i].Base = &room[0]
		r.iovs[i].SetLen(len(room))
		r.hdrs[i] = unix.Mmsghdr{}
		r.hdrs[i].Hdr.Iov = &r.iovs[i]
		r.hdrs[i].Hdr.SetIovlen(1)
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(m),
			unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
		switch e {
		case 0:
		case unix.EINTR, errnoERESTARTSYS:
			continue
		case unix.EAGAIN:
			return false
		default:
			r.err = os.NewSyscallError("recvmmsg", e)
			return true
		}
		k := 0
		for i := 0; i < int(n); i++ {
			size := int(r.hdrs[i].Len)
			if r.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 || size > len(r.bufs[i])-r.off {
				p.RxTrunc.Add(1)
				continue
			}
			if k != i { // compact: move the frame into the k-th caller buffer
				copy(r.bufs[k][r.off:], r.bufs[i][r.off:r.off+size])
			}
			r.sizes[k] = size
			k++
		}
		p.RxPackets.Add(uint64(k))
		r.n = k
		return k != 0
	}
}

// Write implements emu.Port with sendmmsg, BatchSize frames per call.
func (p *PacketPort) Write(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	w := &p.wr
	total := 0
	for total < len(bufs) {
		chunk := bufs[total:min(len(bufs), total+p.batch)]
		w.bufs, w.off, w.n, w.err = chunk, offset, 0, nil
		err := p.rc.Write(w.fn)
		n, werr := w.n, w.err
		w.bufs = nil
		for i := range w.iovs {
			w.iovs[i].Base = nil
		}
		total += n
		if err == nil {
			err = werr
		}
		if err != nil {
			if p.closed.Load() || errors.Is(err, os.ErrClosed) {
				return total, p.errClosed
			}
			return total, err
		}
	}
	p.TxPackets.Add(uint64(total))
	return total, nil
}

func (p *PacketPort) send(fd uintptr) bool {
	w := &p.wr
	for w.n < len(w.bufs) {
		m := len(w.bufs) - w.n
		for i := 0; i < m; i++ {
			f := w.bufs[w.n+i][w.off:]
			w.iovs[i].Base = &f[0]
			w.iovs[i].SetLen(len(f))
			w.hdrs[i] = unix.Mmsghdr{}
			w.hdrs[i].Hdr.Iov = &w.iovs[i]
			w.hdrs[i].Hdr.SetIovlen(1)
		}
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&w.hdrs[0])), uintptr(m), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
		case unix.EINTR, errnoERESTARTSYS:
			continue
		case unix.EAGAIN, unix.ENOBUFS:
			return false
		default:
			w.err = fmt.Errorf("procnode: %s: %w", p.name, os.NewSyscallError("sendmmsg", e))
			return true
		}
		w.n += int(n)
	}
	return true
}

// Close closes the socket and unblocks a pending Read.
func (p *PacketPort) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return p.errClosed
	}
	if p.pollFd >= 0 {
		return unix.Close(p.pollFd)
	}
	return p.file.Close()
}

// PollFd implements emu.PollPort: the socket's fd, moved out of the Go
// netpoller (emu.DupOutOfNetpoller). Read and Write fail afterwards.
func (p *PacketPort) PollFd() (int, error) {
	if p.pollFd >= 0 {
		return p.pollFd, nil
	}
	fd, err := emu.DupOutOfNetpoller(p.file)
	if err != nil {
		return -1, fmt.Errorf("procnode: %s: %w", p.name, err)
	}
	p.pollFd = fd
	return fd, nil
}

// TryRead implements emu.PollPort: one recvmmsg, without waiting.
func (p *PacketPort) TryRead(bufs [][]byte, sizes []int, offset int) (int, error) {
	return p.read(bufs, sizes, offset, false)
}

// TryWrite implements emu.PollPort: sendmmsg, BatchSize frames a call,
// until the socket would block.
func (p *PacketPort) TryWrite(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	w := &p.wr
	total := 0
	for total < len(bufs) {
		chunk := bufs[total:min(len(bufs), total+p.batch)]
		w.bufs, w.off, w.n, w.err = chunk, offset, 0, nil
		p.send(uintptr(p.pollFd))
		n, err := w.n, w.err
		w.bufs = nil
		for i := range w.iovs[:len(chunk)] {
			w.iovs[i].Base = nil
		}
		total += n
		if err != nil || n < len(chunk) {
			p.TxPackets.Add(uint64(total))
			return total, err
		}
	}
	p.TxPackets.Add(uint64(total))
	return total, nil
}
