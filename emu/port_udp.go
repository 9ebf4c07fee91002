//go:build linux

package emu

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// UDPMaxFrame is the largest frame a UDPPort carries: the largest UDP payload
// of an IPv4 datagram.
const UDPMaxFrame = 65507

// Defaults of UDPConfig.
const (
	DefaultUDPBatch        = 64
	DefaultUDPSocketBuffer = 8 << 20
)

// UDPConfig configures NewUDPPortConfig.
type UDPConfig struct {
	// Local is the address the socket binds, e.g. 127.0.0.1:9000. It is
	// ignored when Conn is set.
	Local netip.AddrPort
	// Remote is where written frames are sent. Datagrams from any other
	// source are dropped and counted in PortStats.RxForeign.
	Remote netip.AddrPort
	// Conn, if non-nil, is an already bound IPv4 UDP socket to use instead of
	// binding Local. The port takes ownership of it and closes it on Close.
	Conn *net.UDPConn
	// BatchSize is the most datagrams one recvmmsg/sendmmsg moves; 0 means
	// DefaultUDPBatch.
	BatchSize int
	// SocketBuffer is the SO_RCVBUF and SO_SNDBUF size in bytes; 0 means
	// DefaultUDPSocketBuffer. As root the size is forced past the system
	// limit (SO_RCVBUFFORCE); otherwise the kernel caps it at
	// net.core.rmem_max / wmem_max.
	SocketBuffer int
}

// UDPPort carries one Ethernet frame per UDP datagram between a local socket
// and one remote address, so that an emulated port can be a socket of
// another process. It is IPv4 only. Reads use recvmmsg and writes sendmmsg
// (golang.org/x/net/ipv4 WriteBatch) on preallocated message headers, so
// neither allocates per frame.
//
// Frames go straight between the kernel and the caller's buffers: Read
// receives into bufs[i][offset:] and Write sends from bufs[i][offset:]; the
// port keeps no reference to either after the call returns. UDP may drop or
// (across routers) reorder datagrams; on loopback it does not reorder.
type UDPPort struct {
	name   string
	conn   *net.UDPConn
	pc     *ipv4.PacketConn
	rc     syscall.RawConn
	remote netip.AddrPort
	batch  int
	closed atomic.Bool
	stats  portCounters

	errClosed error

	// Write side, used by one Write at a time.
	wmsgs []ipv4.Message
	wbufs [][]byte // backing of wmsgs[i].Buffers

	// Read side, used by one Read at a time.
	rx udpReceiver

	// Polled use (PollPort): the socket's fd once PollFd took it out of the
	// Go netpoller (-1 before), and TryWrite's sendmmsg batch.
	pollFd int
	tx     udpSender
}

var (
	_ Port     = (*UDPPort)(nil)
	_ PollPort = (*UDPPort)(nil)
)

// NewUDPPort binds laddr and returns a port that sends frames to raddr and
// receives frames from raddr, with the defaults of UDPConfig.
func NewUDPPort(laddr, raddr netip.AddrPort) (*UDPPort, error) {
	return NewUDPPortConfig(UDPConfig{Local: laddr, Remote: raddr})
}

// NewUDPPortConfig returns a UDP port configured by cfg.
func NewUDPPortConfig(cfg UDPConfig) (*UDPPort, error) {
	remote := netip.AddrPortFrom(cfg.Remote.Addr().Unmap(), cfg.Remote.Port())
	if !remote.Addr().Is4() || remote.Port() == 0 {
		if cfg.Conn != nil {
			cfg.Conn.Close()
		}
		return nil, fmt.Errorf("emu: udp port: remote %v: need an IPv4 address and a port", cfg.Remote)
	}
	conn := cfg.Conn
	if conn == nil {
		local := netip.AddrPortFrom(cfg.Local.Addr().Unmap(), cfg.Local.Port())
		if !local.Addr().IsValid() {
			local = netip.AddrPortFrom(netip.IPv4Unspecified(), local.Port())
		}
		if !local.Addr().Is4() {
			return nil, fmt.Errorf("emu: udp port: local %v: need an IPv4 address", cfg.Local)
		}
		var err error
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(local))
		if err != nil {
			return nil, fmt.Errorf("emu: udp port: %w", err)
		}
	}
	batch := cfg.BatchSize
	if batch <= 0 {
		batch = DefaultUDPBatch
	}
	sockBuf := cfg.SocketBuffer
	if sockBuf <= 0 {
		sockBuf = DefaultUDPSocketBuffer
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("emu: udp port: %w", err)
	}
	if err := setSocketBuffers(rc, sockBuf); err != nil {
		conn.Close()
		return nil, fmt.Errorf("emu: udp port: %w", err)
	}
	p := &UDPPort{
		name:   "udp:" + conn.LocalAddr().String() + "->" + remote.String(),
		conn:   conn,
		pc:     ipv4.NewPacketConn(conn),
		rc:     rc,
		remote: remote,
		batch:  batch,
		wmsgs:  make([]ipv4.Message, batch),
		wbufs:  make([][]byte, batch),
		pollFd: -1,
	}
	p.errClosed = fmt.Errorf("emu: %s: %w", p.name, net.ErrClosed)
	raddr := net.UDPAddrFromAddrPort(remote)
	for i := range p.wmsgs {
		p.wmsgs[i].Buffers = p.wbufs[i : i+1 : i+1]
		p.wmsgs[i].Addr = raddr
	}
	p.rx.init(batch, remote)
	p.tx.init(batch, remote)
	return p, nil
}

// setSocketBuffers sets SO_RCVBUF and SO_SNDBUF, forcing them past the
// system maximum when the process may.
func setSocketBuffers(rc syscall.RawConn, size int) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], size) == nil {
				continue
			}
			if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], size); err != nil {
				serr = err
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// Name returns "udp:<local>-><remote>".
func (p *UDPPort) Name() string { return p.name }

// BatchSize returns the most frames one Read returns or one sendmmsg sends.
func (p *UDPPort) BatchSize() int { return p.batch }

// MaxFrame returns UDPMaxFrame.
func (p *UDPPort) MaxFrame() int { return UDPMaxFrame }

// LocalAddr returns the address the socket is bound to.
func (p *UDPPort) LocalAddr() netip.AddrPort {
	return p.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Stats returns a snapshot of the port's counters. It is safe to call
// concurrently with Read and Write.
func (p *UDPPort) Stats() PortStats { return p.stats.snapshot() }

// Write sends each bufs[i][offset:] as one datagram to the remote address,
// BatchSize datagrams per sendmmsg, blocking while the socket buffer is full.
// It returns how many frames were sent; a short count comes with an error,
// wrapping ErrFrameTooLarge for a frame longer than UDPMaxFrame (nothing of
// it is sent) or net.ErrClosed after Close. The headroom bufs[i][:offset] is
// not touched, and Write keeps no reference to bufs after it returns.
func (p *UDPPort) Write(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	sent := 0
	for sent < len(bufs) {
		m, ferr := p.nextBatch(bufs[sent:], offset)
		for i, b := range bufs[sent : sent+m] {
			p.wbufs[i] = b[offset:]
		}
		k := 0
		var werr error
		for k < m {
			n, err := p.pc.WriteBatch(p.wmsgs[k:m], 0)
			if n > 0 {
				var nb uint64
				for _, f := range p.wbufs[k : k+n] {
					nb += uint64(len(f))
				}
				p.stats.framesWritten.Add(uint64(n))
				p.stats.bytesWritten.Add(nb)
				k += n
			}
			if err != nil {
				werr = err
				break
			}
			if n == 0 {
				werr = errors.New("sendmmsg sent nothing")
				break
			}
		}
		clear(p.wbufs[:m])
		sent += k
		if werr != nil {
			if p.closed.Load() {
				return sent, p.errClosed
			}
			return sent, fmt.Errorf("emu: %s: %w", p.name, werr)
		}
		if ferr != nil {
			return sent, ferr
		}
	}
	return sent, nil
}

// nextBatch is how many of bufs, at most BatchSize, go in one sendmmsg: up
// to the first frame longer than UDPMaxFrame, which it counts and returns
// an error for (wrapping ErrFrameTooLarge).
func (p *UDPPort) nextBatch(bufs [][]byte, offset int) (int, error) {
	for m, b := range bufs[:min(len(bufs), p.batch)] {
		if f := b[offset:]; len(f) > UDPMaxFrame {
			p.stats.txOversize.Add(1)
			return m, fmt.Errorf("emu: %s: %d-byte frame: %w", p.name, len(f), ErrFrameTooLarge)
		}
	}
	return min(len(bufs), p.batch), nil
}

// Read blocks until at least one datagram from the remote address arrives,
// then receives up to min(len(bufs), BatchSize) of them with one recvmmsg
// straight into bufs[i][offset:], sets sizes[i] and returns how many. A
// datagram longer than len(bufs[i])-offset is dropped (counted in
// PortStats.RxOversize), never truncated; one from another source is dropped
// (PortStats.RxForeign). The headroom bufs[i][:offset] is not touched. After
// Close, Read returns an error wrapping net.ErrClosed.
func (p *UDPPort) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	m := min(len(bufs), p.batch)
	if m == 0 {
		return 0, nil
	}
	for {
		got, err := p.rx.recv(p.rc, bufs[:m], offset)
		if err != nil {
			if p.closed.Load() || errors.Is(err, net.ErrClosed) {
				return 0, p.errClosed
			}
			return 0, fmt.Errorf("emu: %s: %w", p.name, err)
		}
		if n := p.collect(bufs, sizes, offset, got); n > 0 {
			return n, nil
		}
	}
}

// collect keeps, of the got datagrams recvmmsg put into bufs, the whole
// ones from the remote address, moving them to the front; it sets their
// sizes, counts them and returns how many.
func (p *UDPPort) collect(bufs [][]byte, sizes []int, offset, got int) int {
	n := 0
	var nb uint64
	for i := range got {
		size, ok := p.rx.result(i)
		switch {
		case ok == rxTrunc:
			p.stats.rxOversize.Add(1)
			continue
		case ok == rxForeign:
			p.stats.rxForeign.Add(1)
			continue
		}
		if i != n {
			// Compact over a dropped datagram (rare).
			dst := bufs[n][offset:]
			if size > len(dst) {
				p.stats.rxOversize.Add(1)
				continue
			}
			copy(dst, bufs[i][offset:offset+size])
		}
		sizes[n] = size
		nb += uint64(size)
		n++
	}
	if n > 0 {
		p.stats.framesRead.Add(uint64(n))
		p.stats.bytesRead.Add(nb)
	}
	return n
}

// PollFd implements PollPort: it moves the socket out of the Go netpoller
// (a duplicate of its fd, the original closed; the socket stays bound).
// Read and Write fail afterwards; TryRead and TryWrite use the fd.
func (p *UDPPort) PollFd() (int, error) {
	if p.pollFd >= 0 {
		return p.pollFd, nil
	}
	if p.closed.Load() {
		return -1, p.errClosed
	}
	fd, err := dupOut(p.rc, p.conn)
	if err != nil {
		return -1, fmt.Errorf("emu: %s: %w", p.name, err)
	}
	p.pollFd = fd
	return fd, nil
}

// TryRead implements PollPort: Read without waiting (one recvmmsg). It
// returns 0 frames and a nil error when no datagram from the remote address
// is queued.
func (p *UDPPort) TryRead(bufs [][]byte, sizes []int, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	m := min(len(bufs), p.batch)
	if m == 0 {
		return 0, nil
	}
	got, err := p.rx.try(p.pollFd, bufs[:m], offset)
	if err != nil {
		return 0, fmt.Errorf("emu: %s: %w", p.name, err)
	}
	return p.collect(bufs, sizes, offset, got), nil
}

// TryWrite implements PollPort: Write without waiting (sendmmsg, BatchSize
// datagrams a call). A short count with a nil error means the socket buffer
// is full; a frame longer than UDPMaxFrame ends the call with an error
// wrapping ErrFrameTooLarge, the frames before it sent.
func (p *UDPPort) TryWrite(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	sent := 0
	for sent < len(bufs) {
		m, ferr := p.nextBatch(bufs[sent:], offset)
		k, nb, err := p.tx.try(p.pollFd, bufs[sent:sent+m], offset)
		p.stats.framesWritten.Add(uint64(k))
		p.stats.bytesWritten.Add(nb)
		sent += k
		switch {
		case err != nil:
			return sent, fmt.Errorf("emu: %s: %w", p.name, err)
		case k < m:
			return sent, nil // would block
		case ferr != nil:
			return sent, ferr
		}
	}
	return sent, nil
}

// Close closes the socket and unblocks a pending Read or Write. Closing twice
// returns an error wrapping net.ErrClosed.
func (p *UDPPort) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return p.errClosed
	}
	if p.pollFd >= 0 {
		return unix.Close(p.pollFd)
	}
	return p.conn.Close()
}
