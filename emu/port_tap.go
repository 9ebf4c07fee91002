//go:build linux

package emu

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/songgao/water"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DefaultTAPBatch is the default TAPConfig.BatchSize.
const DefaultTAPBatch = 64

// ethHeaderLen is the length of an untagged Ethernet header.
const ethHeaderLen = 14

// tapScratchLen bounds any frame a TAP fd can return (64 KiB plus slack).
const tapScratchLen = 65536 + 256

// TAPConfig configures NewTAPPort.
type TAPConfig struct {
	// Name is the interface name (at most 15 bytes). If a device of that
	// name exists, the port attaches to it and leaves it in place on Close.
	// Otherwise (or if Name is empty, letting the kernel pick tapN) the port
	// creates the device, brings it up and deletes it on Close.
	Name string
	// BatchSize is the most frames one Read returns; 0 means
	// DefaultTAPBatch. A TAP fd moves one frame per system call, so a batch
	// is collected by reading until the fd has no more frames queued.
	BatchSize int
	// MTU, if positive, is set on a device the port creates. An existing
	// device keeps its MTU.
	MTU int
}

// TAPPort is a port backed by a Linux TAP device through songgao/water, in
// the network namespace of the thread that called NewTAPPort (its fd keeps
// working from any thread afterwards).
//
// Read reads frames straight into bufs[i][offset:] (with readv, plus a
// private scratch tail that only detects oversize frames) and Write writes
// bufs[i][offset:] in place; neither keeps a reference to the caller's
// buffers after it returns. Read waits in the Go netpoller and then drains up
// to BatchSize frames that are already queued without blocking; Write makes
// one write(2) per frame.
//
// Ownership of the device: if the named device existed, it is opened with
// TUNSETPERSIST kept on (water clears it otherwise), so Close leaves it as
// found. If the port created it, Close deletes it. (There is a small window
// between the existence check and the open in which another process could
// create the device; the port would then treat it as its own.)
type TAPPort struct {
	name     string
	ifce     *water.Interface
	file     *os.File
	rc       syscall.RawConn
	created  bool
	maxFrame int
	batch    int
	closed   atomic.Bool
	stats    portCounters
	pollFd   int // ≥ 0 once PollFd moved the device out of the Go netpoller

	errClosed error

	// Read side, used by one Read at a time.
	rd struct {
		bufs    [][]byte
		sizes   []int
		offset  int
		n       int
		err     error
		iov     [2]unix.Iovec
		scratch []byte
		fn      func(fd uintptr) bool
	}
	// Write side, used by one Write at a time.
	wr struct {
		bufs   [][]byte
		offset int
		n      int
		err    error
		fn     func(fd uintptr) bool
	}
}

var _ PollPort = (*TAPPort)(nil)

// NewTAPPort opens (or creates) the TAP device cfg.Name in the calling
// thread's network namespace. It needs CAP_NET_ADMIN and /dev/net/tun.
func NewTAPPort(cfg TAPConfig) (*TAPPort, error) {
	if len(cfg.Name) > unix.IFNAMSIZ-1 {
		return nil, fmt.Errorf("emu: tap %q: name longer than %d bytes", cfg.Name, unix.IFNAMSIZ-1)
	}
	existed := false
	if cfg.Name != "" {
		_, err := netlink.LinkByName(cfg.Name)
		var notFound netlink.LinkNotFoundError
		switch {
		case err == nil:
			existed = true
		case errors.As(err, &notFound):
		default:
			return nil, fmt.Errorf("emu: tap %q: %w", cfg.Name, err)
		}
	}
	wc := water.Config{DeviceType: water.TAP}
	wc.Name = cfg.Name
	wc.Persist = existed
	ifce, err := water.New(wc)
	if err != nil {
		return nil, fmt.Errorf("emu: tap %q: %w", cfg.Name, err)
	}
	file, ok := ifce.ReadWriteCloser.(*os.File)
	if !ok {
		ifce.Close()
		return nil, fmt.Errorf("emu: tap %q: water returned %T, want *os.File", cfg.Name, ifce.ReadWriteCloser)
	}
	p := &TAPPort{
		name:    "tap:" + ifce.Name(),
		ifce:    ifce,
		file:    file,
		created: !existed,
		batch:   cfg.BatchSize,
		pollFd:  -1,
	}
	if p.batch <= 0 {
		p.batch = DefaultTAPBatch
	}
	fail := func(err error) (*TAPPort, error) {
		ifce.Close() // deletes the device if we created it (persist is off)
		return nil, fmt.Errorf("emu: %s: %w", p.name, err)
	}
	if p.rc, err = file.SyscallConn(); err != nil {
		return fail(err)
	}
	link, err := netlink.LinkByName(ifce.Name())
	if err != nil {
		return fail(err)
	}
	if p.created {
		if cfg.MTU > 0 {
			if err := netlink.LinkSetMTU(link, cfg.MTU); err != nil {
				return fail(err)
			}
			link.Attrs().MTU = cfg.MTU
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fail(err)
		}
	}
	p.maxFrame = link.Attrs().MTU + ethHeaderLen
	p.errClosed = fmt.Errorf("emu: %s: %w", p.name, net.ErrClosed)
	p.rd.scratch = make([]byte, tapScratchLen)
	p.rd.fn = p.readFrames
	p.wr.fn = p.writeFrames
	return p, nil
}

// Name returns "tap:<interface>".
func (p *TAPPort) Name() string { return p.name }

// InterfaceName returns the name of the TAP device.
func (p *TAPPort) InterfaceName() string { return p.ifce.Name() }

// Created reports whether the port created the device (and so deletes it on
// Close).
func (p *TAPPort) Created() bool { return p.created }

// BatchSize returns the most frames one Read returns.
func (p *TAPPort) BatchSize() int { return p.batch }

// MaxFrame returns the device's MTU plus the 14-byte Ethernet header, as
// read when the port was opened: the largest untagged frame the kernel
// forwards from this device.
func (p *TAPPort) MaxFrame() int { return p.maxFrame }

// Stats returns a snapshot of the port's counters. It is safe to call
// concurrently with Read and Write.
func (p *TAPPort) Stats() PortStats { return p.stats.snapshot() }

// Read waits until the device has a frame, then reads up to
// min(len(bufs), BatchSize) frames that are queued, each straight into
// bufs[i][offset:], sets sizes[i] and returns how many. A frame longer than
// len(bufs[i])-offset is dropped (counted in PortStats.RxOversize), never
// truncated. The headroom bufs[i][:offset] is not touched. After Close, Read
// returns an error wrapping net.ErrClosed.
func (p *TAPPort) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	m := min(len(bufs), p.batch)
	if m == 0 {
		return 0, nil
	}
	r := &p.rd
	r.bufs, r.sizes, r.offset, r.n, r.err = bufs[:m], sizes, offset, 0, nil
	err := p.rc.Read(r.fn)
	n, rerr := r.n, r.err
	r.bufs, r.sizes = nil, nil
	r.iov[0].Base = nil
	if err == nil {
		err = rerr
	}
	if n > 0 {
		// Frames already read are delivered; a persistent error shows up
		// again on the next Read.
		return n, nil
	}
	if err != nil {
		if p.closed.Load() || errors.Is(err, os.ErrClosed) {
			return 0, p.errClosed
		}
		return 0, fmt.Errorf("emu: %s: %w", p.name, err)
	}
	return 0, nil
}

// readFrames is the RawConn.Read callback. It reads frames until the batch is
// full or the fd has none queued; it returns false (wait for readability)
// only while it has read nothing.
func (p *TAPPort) readFrames(fd uintptr) bool {
	r := &p.rd
	for r.n < len(r.bufs) {
		room := r.bufs[r.n][r.offset:]
		iovs := r.iov[:]
		if len(room) > 0 {
			r.iov[0].Base = &room[0]
			r.iov[0].SetLen(len(room))
		} else {
			iovs = r.iov[1:]
		}
		r.iov[1].Base = &r.scratch[0]
		r.iov[1].SetLen(len(r.scratch))
		n, _, e := unix.Syscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&iovs[0])), uintptr(len(iovs)))
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return r.n > 0
		default:
			r.err = os.NewSyscallError("readv", e)
			return true
		}
		size := int(n)
		if size > len(room) {
			p.stats.rxOversize.Add(1)
			continue
		}
		r.sizes[r.n] = size
		r.n++
		p.stats.framesRead.Add(1)
		p.stats.bytesRead.Add(uint64(size))
	}
	return true
}

// Write writes each bufs[i][offset:] to the device as one frame and returns
// how many were written; a short count comes with an error, wrapping
// ErrFrameTooLarge for a frame longer than MaxFrame (nothing of it is
// written) or net.ErrClosed after Close. The headroom is not touched and
// Write keeps no reference to bufs after it returns.
func (p *TAPPort) Write(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	w := &p.wr
	w.bufs, w.offset, w.n, w.err = bufs, offset, 0, nil
	err := p.rc.Write(w.fn)
	n, werr := w.n, w.err
	w.bufs = nil
	if err == nil {
		err = werr
	}
	if err != nil {
		if !errors.Is(err, ErrFrameTooLarge) && (p.closed.Load() || errors.Is(err, os.ErrClosed)) {
			return n, p.errClosed
		}
		return n, err
	}
	return n, nil
}

// writeFrames is the RawConn.Write callback; it returns false (wait for
// writability) when the device queue is full.
func (p *TAPPort) writeFrames(fd uintptr) bool {
	w := &p.wr
	for w.n < len(w.bufs) {
		f := w.bufs[w.n][w.offset:]
		if len(f) > p.maxFrame {
			p.stats.txOversize.Add(1)
			w.err = fmt.Errorf("emu: %s: %d-byte frame: %w", p.name, len(f), ErrFrameTooLarge)
			return true
		}
		var ptr unsafe.Pointer
		if len(f) > 0 {
			ptr = unsafe.Pointer(&f[0])
		}
		_, _, e := unix.Syscall(unix.SYS_WRITE, fd, uintptr(ptr), uintptr(len(f)))
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			w.err = fmt.Errorf("emu: %s: %w", p.name, os.NewSyscallError("write", e))
			return true
		}
		w.n++
		p.stats.framesWritten.Add(1)
		p.stats.bytesWritten.Add(uint64(len(f)))
	}
	return true
}

// Close closes the device fd, which unblocks a pending Read or Write. A
// device the port created is deleted; an existing one is left in place.
// Closing twice returns an error wrapping net.ErrClosed.
func (p *TAPPort) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return p.errClosed
	}
	if p.pollFd >= 0 {
		return unix.Close(p.pollFd)
	}
	return p.ifce.Close()
}

// PollFd implements PollPort: it moves the device's fd out of the Go
// netpoller (whose threads would otherwise wake for every frame the
// driver's own epoll reads) by duplicating it and closing the original;
// the device stays as it was. Read and Write fail afterwards.
func (p *TAPPort) PollFd() (int, error) {
	if p.pollFd >= 0 {
		return p.pollFd, nil
	}
	fd, err := dupOut(p.rc, p.file)
	if err != nil {
		return -1, fmt.Errorf("emu: %s: %w", p.name, err)
	}
	p.pollFd = fd
	return fd, nil
}

// TryRead implements PollPort: Read without waiting.
func (p *TAPPort) TryRead(bufs [][]byte, sizes []int, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	r := &p.rd
	r.bufs, r.sizes, r.offset, r.n, r.err = bufs[:min(len(bufs), p.batch)], sizes, offset, 0, nil
	p.readFrames(uintptr(p.pollFd))
	n, err := r.n, r.err
	r.bufs, r.sizes = nil, nil
	r.iov[0].Base = nil
	if n > 0 {
		return n, nil
	}
	if err != nil {
		return 0, fmt.Errorf("emu: %s: %w", p.name, err)
	}
	return 0, nil
}

// TryWrite implements PollPort: Write without waiting.
func (p *TAPPort) TryWrite(bufs [][]byte, offset int) (int, error) {
	if p.closed.Load() {
		return 0, p.errClosed
	}
	w := &p.wr
	w.bufs, w.offset, w.n, w.err = bufs, offset, 0, nil
	p.writeFrames(uintptr(p.pollFd))
	n, err := w.n, w.err
	w.bufs = nil
	return n, err
}

// dupOut duplicates f's fd (close-on-exec; the file status flags, so
// O_NONBLOCK, are shared) and closes f, which takes the original out of
// the Go netpoller. The caller owns the duplicate.
func dupOut(rc syscall.RawConn, f io.Closer) (int, error) {
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, os.NewSyscallError("fcntl", derr)
	}
	if err := f.Close(); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// DupOutOfNetpoller is dupOut for backends outside this package (an
// AF_PACKET socket): the fd of f, moved out of the Go netpoller.
func DupOutOfNetpoller(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	return dupOut(rc, f)
}
