//go:build linux

package procnode

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/inabox/inabox/emu"
)

// XDP attach modes (XDPConfig.Mode, Attachment.XDPMode).
const (
	// XDPModeAuto attaches in native (driver) mode and, where the driver
	// refuses, in generic (SKB) mode: "native where the kernel supports
	// it, generic otherwise". The port reports which (XDPPort.Mode).
	XDPModeAuto = "auto"
	// XDPModeNative attaches in native mode only (XDP_FLAGS_DRV_MODE).
	XDPModeNative = "native"
	// XDPModeGeneric attaches in generic mode only (XDP_FLAGS_SKB_MODE).
	XDPModeGeneric = "generic"
)

// UMEM geometry: 4 KiB chunks (one page: the most an aligned UMEM chunk
// may be), half of them for receiving (all in the fill ring when idle),
// half for sending. A received frame starts XDP_PACKET_HEADROOM into its
// chunk, so the largest frame is 4096-256 = 3840 bytes; the largest MTU
// native XDP on veth accepts is about 3500 anyway.
const (
	xdpFrameSize = 4096
	xdpRxFrames  = 2048 // fill and RX ring size
	xdpTxFrames  = 2048 // TX and completion ring size
	xdpFrames    = xdpRxFrames + xdpTxFrames
	// XDPMaxFrame is the largest frame an XDPPort sends or receives.
	XDPMaxFrame = xdpFrameSize - unix.XDP_PACKET_HEADROOM
)

// XDPConfig configures NewXDPPort.
type XDPConfig struct {
	// Dev is the interface (in the caller's namespace); the port serves
	// its receive queue Queue (0), which must be its only one.
	Dev   string
	Queue int
	// Mode is XDPModeAuto (""), XDPModeNative or XDPModeGeneric.
	Mode string
	// BatchSize is the most frames one Read returns (0: DefaultPacketBatch).
	BatchSize int
}

// Notes receives what the xdp backend of an Attachment has to say: the
// mode each port got, and a fallback taken.
var Notes io.Writer = os.Stderr

// ErrXDPUnavailable is wrapped by NewXDPPort's errors when AF_XDP or XDP
// cannot be used on the device (no privilege, no kernel support, a driver
// without the asked mode, ...): the errors an explicit fallback to
// AF_PACKET may act on.
var ErrXDPUnavailable = errors.New("AF_XDP unavailable")

// xdpRing is one of the four mmapped AF_XDP rings: a producer and a
// consumer index (free-running u32) and a power-of-two array of
// descriptors (u64 UMEM addresses for fill/completion, xdp_desc for RX/TX).
type xdpRing struct {
	mem   []byte
	prod  *uint32
	cons  *uint32
	flags *uint32
	desc  unsafe.Pointer
	mask  uint32
}

func (r *xdpRing) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}

func (r *xdpRing) xdesc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// XDPPort is an emu.Port on an AF_XDP socket bound to one queue of an
// interface, with an XDP program (built here with cilium/ebpf's asm, no C)
// that redirects every frame of that queue to the socket through an
// XSKMAP (frames of other queues, if any, go on to the kernel's stack).
//
// Frames are copied between the UMEM and the caller's buffers in both
// directions: emu.Port's buffers are owned by the caller and reused as soon
// as Read or Write returns, so a UMEM frame cannot be lent out; the copy of
// a 314-byte frame costs far less than a system call. Whether the kernel
// copies too (copy mode) or the NIC writes straight into the UMEM
// (zero-copy) depends on the driver; veth has no zero-copy, so on veth the
// port runs in copy mode (XDPPort.ZeroCopy false), in native mode (the
// program runs in veth's NAPI receive path) or generic mode.
//
// Receiving needs no system call while frames are waiting (the RX ring is
// read in place); sending copies the frames into free UMEM chunks, posts
// them on the TX ring and, when the kernel asks for it
// (XDP_USE_NEED_WAKEUP; always in copy mode), kicks it with one
// sendto(MSG_DONTWAIT) per batch. Write returns once the kernel has taken
// every frame off the TX ring.
type XDPPort struct {
	name  string
	dev   string
	fd    int // the socket until file owns it (then -1)
	sock  int // the socket's number (never File.Fd: it makes the fd blocking)
	file  *os.File
	rc    syscall.RawConn
	batch int

	umem                []byte
	fill, comp, rx, tx  xdpRing
	txFree              []uint64 // free TX chunks (writer only)
	prog                *ebpf.Program
	xsks                *ebpf.Map
	lnk                 link.Link
	mode                string
	zeroCopy            bool
	modeNote            string
	closed              atomic.Bool
	rdMu, wrMu, closeMu sync.Mutex

	RxPackets, TxPackets, RxTrunc, TxKicks atomic.Uint64

	errClosed error

	// Polled use (emu.PollPort): the socket out of the Go netpoller, and
	// the TX ring's frames up to reported counted as written. Frames posted
	// after reported that the kernel had not taken when TryWrite returned
	// were not counted: the driver passes them again first (the rest of a
	// short write comes back, in order), and TryWrite skips them.
	polled   bool
	reported uint32

	rd struct {
		bufs  [][]byte
		sizes []int
		off   int
		n     int
		fn    func(fd uintptr) bool
	}
}

var _ emu.PollPort = (*XDPPort)(nil)

// xdpFail wraps err for device dev and step what, marking the errors that
// mean AF_XDP/XDP is not available (ErrXDPUnavailable) and saying why.
func xdpFail(dev, what string, err error, hint string) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		hint = "needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF"
	case errors.Is(err, unix.EAFNOSUPPORT):
		hint = "the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)"
	case errors.Is(err, unix.ENOSYS):
		hint = "the kernel has no bpf(2)"
	}
	msg := fmt.Sprintf("procnode: xdp on %s: %s: %v", dev, what, err)
	if hint != "" {
		msg += " (" + hint + ")"
	}
	return &xdpError{msg: msg, err: err}
}

// xdpError is an error of NewXDPPort that means XDP is unavailable.
type xdpError struct {
	msg string
	err error
}

func (e *xdpError) Error() string   { return e.msg }
func (e *xdpError) Unwrap() []error { return []error{e.err, ErrXDPUnavailable} }

func getsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func setsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, n, descSize uint32) (xdpRing, error) {
	mem, err := unix.Mmap(fd, pgoff, int(off.Desc)+int(n*descSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return xdpRing{}, err
	}
	return xdpRing{
		mem:   mem,
		prod:  (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		cons:  (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags: (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		desc:  unsafe.Pointer(&mem[off.Desc]),
		mask:  n - 1,
	}, nil
}

// xdpProgram builds the XDP program: bpf_redirect_map(&xsks,
// ctx->rx_queue_index, XDP_PASS): to the socket of the frame's queue, or
// on to the stack if the queue has none.
func xdpProgram(xsks *ebpf.Map) (*ebpf.Program, error) {
	return ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name: "inabox_xsk",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 16, asm.Word), // struct xdp_md.rx_queue_index
			asm.LoadMapPtr(asm.R1, xsks.FD()),
			asm.Mov.Imm(asm.R3, 2), // flags: XDP_PASS if the map has no entry
			asm.FnRedirectMap.Call(),
			asm.Return(),
		},
		License: "Dual MIT/GPL",
	}, ebpf.ProgramOptions{})
}

// XDPPeerPass attaches an XDP_PASS program to dev in native mode and
// returns the function that detaches it. Native XDP on veth needs it on
// the peer of a device that receives XDP_TX or XDP_REDIRECT frames (to
// enable the peer's NAPI); an AF_XDP socket in copy mode sends through the
// ordinary transmit path and does not need it.
func XDPPeerPass(dev string) (func() error, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, fmt.Errorf("procnode: xdp on %s: %w", dev, err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err != nil {
		return nil, xdpFail(dev, "loading the XDP_PASS program", err, "")
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
	prog.Close()
	if err != nil {
		return nil, xdpFail(dev, "attaching the XDP_PASS program", err, "")
	}
	return l.Close, nil
}

// NewXDPPort opens an AF_XDP socket on cfg.Dev's queue cfg.Queue and
// attaches the redirecting XDP program (see XDPConfig.Mode). It needs root
// (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and, for the UMEM's locked pages,
// CAP_IPC_LOCK or enough RLIMIT_MEMLOCK). Errors wrap ErrXDPUnavailable
// when XDP cannot be used on the device.
func NewXDPPort(cfg XDPConfig) (_ *XDPPort, err error) {
	dev := cfg.Dev
	mode := cfg.Mode
	if mode == "" {
		mode = XDPModeAuto
	}
	if mode != XDPModeAuto && mode != XDPModeNative && mode != XDPModeGeneric {
		return nil, fmt.Errorf("procnode: xdp on %s: unknown mode %q (want %q, %q or %q)", dev, mode, XDPModeAuto, XDPModeNative, XDPModeGeneric)
	}
	nl, err := netlink.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("procnode: xdp on %s: %w", dev, err)
	}
	attrs := nl.Attrs()
	if q := attrs.NumRxQueues; q > 1 {
		return nil, fmt.Errorf("procnode: xdp on %s: %d receive queues; the port serves queue %d only (make the device with one queue, e.g. a veth with numrxqueues 1 numtxqueues 1)", dev, q, cfg.Queue)
	}
	if attrs.Xdp != nil && attrs.Xdp.Attached {
		return nil, xdpFail(dev, "attaching", unix.EBUSY, fmt.Sprintf("the device already has XDP program %d", attrs.Xdp.ProgId))
	}
	p := &XDPPort{name: "xdp:" + dev, dev: dev, batch: cfg.BatchSize, fd: -1}
	if p.batch <= 0 {
		p.batch = DefaultPacketBatch
	}
	defer func() {
		if err != nil {
			p.release()
		}
	}()
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, xdpFail(dev, "socket(AF_XDP)", err, "")
	}
	p.fd = fd
	p.umem, err = unix.Mmap(-1, 0, xdpFrames*xdpFrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("procnode: xdp on %s: UMEM: %w", dev, err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&p.umem[0]))), Len: uint64(len(p.umem)), Size: xdpFrameSize}
	if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		hint := ""
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) {
			hint = fmt.Sprintf("the %d MiB UMEM exceeds RLIMIT_MEMLOCK without CAP_IPC_LOCK", len(p.umem)>>20)
		}
		return nil, xdpFail(dev, "XDP_UMEM_REG", err, hint)
	}
	for _, r := range []struct {
		opt int
		n   int
	}{{unix.XDP_UMEM_FILL_RING, xdpRxFrames}, {unix.XDP_UMEM_COMPLETION_RING, xdpTxFrames}, {unix.XDP_RX_RING, xdpRxFrames}, {unix.XDP_TX_RING, xdpTxFrames}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, r.opt, r.n); err != nil {
			return nil, xdpFail(dev, "ring setup", err, "")
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return nil, xdpFail(dev, "XDP_MMAP_OFFSETS", err, "")
	}
	descSize := uint32(unsafe.Sizeof(unix.XDPDesc{}))
	for _, m := range []struct {
		r     *xdpRing
		pgoff int64
		off   unix.XDPRingOffset
		n     uint32
		size  uint32
	}{
		{&p.fill, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, xdpRxFrames, 8},
		{&p.comp, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, xdpTxFrames, 8},
		{&p.rx, unix.XDP_PGOFF_RX_RING, off.Rx, xdpRxFrames, descSize},
		{&p.tx, unix.XDP_PGOFF_TX_RING, off.Tx, xdpTxFrames, descSize},
	} {
		if *m.r, err = mapRing(fd, m.pgoff, m.off, m.n, m.size); err != nil {
			return nil, xdpFail(dev, "mmap ring", err, "")
		}
	}
	// Every receive chunk goes to the kernel; the send chunks are ours.
	for i := uint32(0); i < xdpRxFrames; i++ {
		*p.fill.addr(i) = uint64(i) * xdpFrameSize
	}
	atomic.StoreUint32(p.fill.prod, xdpRxFrames)
	p.txFree = make([]uint64, 0, xdpTxFrames)
	for i := xdpFrames - 1; i >= xdpRxFrames; i-- {
		p.txFree = append(p.txFree, uint64(i)*xdpFrameSize)
	}
	// A socket sends from its own buffer: let a full TX ring be in flight.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 32<<20)
	// Copy mode sends at most this many frames per kick (default 32).
	_ = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, 256)

	// The program and its map; attach native, else generic.
	p.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "inabox_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(cfg.Queue + 1)})
	if err != nil {
		return nil, xdpFail(dev, "creating the XSKMAP", err, "")
	}
	if p.prog, err = xdpProgram(p.xsks); err != nil {
		return nil, xdpFail(dev, "loading the XDP program", err, "")
	}
	var nativeErr error
	if mode != XDPModeGeneric {
		p.lnk, nativeErr = link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: attrs.Index, Flags: link.XDPDriverMode})
		if nativeErr == nil {
			p.mode = XDPModeNative
		} else if mode == XDPModeNative {
			return nil, xdpFail(dev, "native attach", nativeErr, nativeHint(attrs, nativeErr)+"; generic mode available with --xdp-mode generic")
		} else {
			p.modeNote = "native: " + nativeHint(attrs, nativeErr)
		}
	}
	if p.mode == "" {
		if p.lnk, err = link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: attrs.Index, Flags: link.XDPGenericMode}); err != nil {
			if nativeErr != nil {
				return nil, xdpFail(dev, "attach", err, "native: "+nativeHint(attrs, nativeErr)+"; generic failed too")
			}
			return nil, xdpFail(dev, "generic attach", err, "")
		}
		p.mode = XDPModeGeneric
	}
	// Bind: zero-copy where the driver has it in native mode, copy
	// otherwise (a generic-mode program hands the socket copies).
	flags := uint16(unix.XDP_USE_NEED_WAKEUP)
	if p.mode == XDPModeGeneric {
		flags |= unix.XDP_COPY
	}
	if err := unix.Bind(fd, &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(attrs.Index), QueueID: uint32(cfg.Queue)}); err != nil {
		return nil, xdpFail(dev, "bind", err, "")
	}
	if opts, err := unix.GetsockoptInt(fd, unix.SOL_XDP, unix.XDP_OPTIONS); err == nil {
		p.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	if err := p.xsks.Put(uint32(cfg.Queue), uint32(fd)); err != nil {
		return nil, xdpFail(dev, "XSKMAP update", err, "")
	}
	p.file = os.NewFile(uintptr(fd), p.name) // registers with the netpoller (fd is non-blocking)
	p.sock, p.fd = fd, -1                    // owned by file now
	if p.rc, err = p.file.SyscallConn(); err != nil {
		return nil, err
	}
	p.errClosed = fmt.Errorf("procnode: %s: %w", p.name, net.ErrClosed)
	p.rd.fn = p.recv
	return p, nil
}

func nativeHint(attrs *netlink.LinkAttrs, err error) string {
	drv := "this driver"
	if t := linkType(attrs.Name); t != "" {
		drv = "driver " + t
	}
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return "native XDP unsupported by " + drv
	case errors.Is(err, unix.ERANGE):
		return fmt.Sprintf("MTU %d too large for native XDP on %s", attrs.MTU, drv)
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EEXIST):
		return "another XDP program is attached"
	}
	return fmt.Sprintf("native XDP refused by %s: %v", drv, err)
}

func linkType(dev string) string {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return ""
	}
	return l.Type()
}

// Name returns "xdp:<dev>".
func (p *XDPPort) Name() string { return p.name }

// BatchSize returns the most frames one Read returns.
func (p *XDPPort) BatchSize() int { return p.batch }

// Fd returns the AF_XDP socket (readable when the RX ring has frames),
// valid until Close.
func (p *XDPPort) Fd() int { return p.sock }

// Mode returns the attach mode the port got: XDPModeNative or XDPModeGeneric.
func (p *XDPPort) Mode() string { return p.mode }

// ZeroCopy reports whether the socket is bound in zero-copy mode.
func (p *XDPPort) ZeroCopy() bool { return p.zeroCopy }

// ModeNote says why an XDPModeAuto port is not native ("" if it is).
func (p *XDPPort) ModeNote() string { return p.modeNote }

// Describe is e.g. "xdp:eth0 native copy".
func (p *XDPPort) Describe() string {
	c := "copy"
	if p.zeroCopy {
		c = "zero-copy"
	}
	s := p.name + " " + p.mode + " " + c
	if p.modeNote != "" {
		s += " (" + p.modeNote + ")"
	}
	return s
}

// KernelStats returns the socket's XDP_STATISTICS (drops for a full RX
// ring or an empty fill ring, invalid descriptors).
func (p *XDPPort) KernelStats() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	get := func(fd uintptr) {
		if e := getsockopt(int(fd), unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st)); e != nil {
			st = unix.XDPStatistics{}
		}
	}
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.polled {
		get(uintptr(p.sock))
		return st, nil
	}
	err := p.rc.Control(get)
	return st, err
}

// Read implements emu.Port: it copies the frames waiting in the RX ring
// (up to len(bufs)), returns their chunks to the fill ring and waits in
// the netpoller only when there are none.
func (p *XDPPort) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	p.rdMu.Lock()
	defer p.rdMu.Unlock()
	if p.closed.Load() {
		return 0, p.errClosed
	}
	if p.polled {
		return 0, p.errPolled()
	}
	m := min(len(bufs), p.batch)
	if m == 0 {
		return 0, nil
	}
	r := &p.rd
	r.bufs, r.sizes, r.off, r.n = bufs[:m], sizes, offset, 0
	var err error
	if !p.recv(0) {
		err = p.rc.Read(r.fn)
	}
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

func (p *XDPPort) recv(uintptr) bool {
	r := &p.rd
	cons := atomic.LoadUint32(p.rx.cons)
	prod := atomic.LoadUint32(p.rx.prod)
	if cons == prod {
		return false
	}
	fprod := atomic.LoadUint32(p.fill.prod)
	for cons != prod && r.n < len(r.bufs) {
		d := p.rx.xdesc(cons)
		size := int(d.Len)
		if size <= len(r.bufs[r.n])-r.off {
			copy(r.bufs[r.n][r.off:], p.umem[d.Addr:d.Addr+uint64(d.Len)])
			r.sizes[r.n] = size
			r.n++
		} else {
			p.RxTrunc.Add(1)
		}
		*p.fill.addr(fprod) = d.Addr &^ (xdpFrameSize - 1)
		fprod++
		cons++
	}
	atomic.StoreUint32(p.rx.cons, cons)
	atomic.StoreUint32(p.fill.prod, fprod)
	if atomic.LoadUint32(p.fill.flags)&unix.XDP_RING_NEED_WAKEUP != 0 {
		// The driver waits for fill entries (zero-copy): wake it.
		unix.Syscall6(unix.SYS_RECVFROM, uintptr(p.sock), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	}
	if r.n > 0 {
		p.RxPackets.Add(uint64(r.n))
	}
	return r.n > 0
}

// reclaim takes the chunks of sent frames back from the completion ring.
func (p *XDPPort) reclaim() {
	cons := atomic.LoadUint32(p.comp.cons)
	prod := atomic.LoadUint32(p.comp.prod)
	for ; cons != prod; cons++ {
		p.txFree = append(p.txFree, *p.comp.addr(cons))
	}
	atomic.StoreUint32(p.comp.cons, cons)
}

// kick asks the kernel to send what is on the TX ring if it wants to be
// asked (XDP_RING_NEED_WAKEUP); it reports whether it should be retried
// later (the kernel's send budget or buffer was exhausted), or an error.
func (p *XDPPort) kick(fd uintptr) (again bool, err error) {
	if atomic.LoadUint32(p.tx.flags)&unix.XDP_RING_NEED_WAKEUP == 0 {
		return false, nil
	}
	for {
		p.TxKicks.Add(1)
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return false, nil
		case unix.EINTR, errnoERESTARTSYS:
			continue
		case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
			return true, nil
		}
		return false, fmt.Errorf("procnode: %s: %w", p.name, os.NewSyscallError("sendto", e))
	}
}

// backoff waits a little for the kernel (completions, send buffer):
// yields first, then sleeps. It reports false once the port is closed.
func (p *XDPPort) backoff(spins *int) bool {
	*spins++
	if *spins < 64 {
		runtime.Gosched()
	} else {
		time.Sleep(20 * time.Microsecond)
	}
	return !p.closed.Load()
}

// post copies frame f into a free TX chunk (there must be one) and
// describes it at TX ring position prod, which the caller then publishes;
// a frame larger than a chunk is refused.
func (p *XDPPort) post(f []byte, prod uint32) error {
	if len(f) > XDPMaxFrame {
		return fmt.Errorf("procnode: %s: %d-byte frame: %w", p.name, len(f), emu.ErrFrameTooLarge)
	}
	a := p.txFree[len(p.txFree)-1]
	p.txFree = p.txFree[:len(p.txFree)-1]
	copy(p.umem[a:a+xdpFrameSize], f)
	d := p.tx.xdesc(prod)
	d.Addr, d.Len, d.Options = a, uint32(len(f)), 0
	return nil
}

// Write implements emu.Port: it copies the frames into free TX chunks,
// posts them and kicks the kernel (at most BatchSize frames a kick),
// waiting for chunks or for the kernel when it must; it returns once the
// kernel has taken every frame off the TX ring.
func (p *XDPPort) Write(bufs [][]byte, offset int) (int, error) {
	p.wrMu.Lock()
	defer p.wrMu.Unlock()
	if p.closed.Load() {
		return 0, p.errClosed
	}
	if p.polled {
		return 0, p.errPolled()
	}
	fd := uintptr(p.sock)
	sent, spins := 0, 0
	prod := atomic.LoadUint32(p.tx.prod)
	var ferr error
	for sent < len(bufs) && ferr == nil {
		p.reclaim()
		room := xdpTxFrames - (prod - atomic.LoadUint32(p.tx.cons))
		q := 0
		for sent < len(bufs) && room > 0 && len(p.txFree) > 0 && q < p.batch {
			if ferr = p.post(bufs[sent][offset:], prod); ferr != nil {
				break
			}
			prod++
			room--
			q++
			sent++
		}
		if q > 0 {
			atomic.StoreUint32(p.tx.prod, prod)
		}
		again, err := p.kick(fd)
		if err != nil {
			return sent, err
		}
		if q == 0 || again {
			if !p.backoff(&spins) {
				return sent, p.errClosed
			}
		} else {
			spins = 0
		}
	}
	// The kernel sends in sendto (copy mode): frames left on the ring
	// would wait for the next Write.
	for atomic.LoadUint32(p.tx.cons) != prod && atomic.LoadUint32(p.tx.flags)&unix.XDP_RING_NEED_WAKEUP != 0 {
		again, err := p.kick(fd)
		if err != nil {
			return sent, err
		}
		if again && !p.backoff(&spins) {
			return sent, p.errClosed
		}
	}
	p.TxPackets.Add(uint64(sent))
	return sent, ferr
}

func (p *XDPPort) errPolled() error {
	return fmt.Errorf("procnode: %s: polled (PollFd): use TryRead and TryWrite", p.name)
}

// PollFd implements emu.PollPort: the socket, moved out of the Go
// netpoller (emu.DupOutOfNetpoller), readable when the RX ring holds
// frames, writable when the TX ring has room. In copy mode the kernel
// also sends what waits on the TX ring when the socket is polled. Read
// and Write fail afterwards.
func (p *XDPPort) PollFd() (int, error) {
	p.rdMu.Lock()
	defer p.rdMu.Unlock()
	p.wrMu.Lock()
	defer p.wrMu.Unlock()
	if p.closed.Load() {
		return -1, p.errClosed
	}
	if p.polled {
		return p.sock, nil
	}
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	fd, err := emu.DupOutOfNetpoller(p.file)
	if err != nil {
		return -1, fmt.Errorf("procnode: %s: %w", p.name, err)
	}
	// The XSKMAP holds the socket itself, not the old number.
	p.file, p.rc, p.fd, p.sock = nil, nil, fd, fd
	p.polled = true
	p.reported = atomic.LoadUint32(p.tx.prod)
	return fd, nil
}

// TryRead implements emu.PollPort: the frames waiting in the RX ring (up
// to len(bufs) and BatchSize), without a system call unless the driver
// waits for fill entries.
func (p *XDPPort) TryRead(bufs [][]byte, sizes []int, offset int) (int, error) {
	p.rdMu.Lock()
	defer p.rdMu.Unlock()
	if p.closed.Load() {
		return 0, p.errClosed
	}
	r := &p.rd
	r.bufs, r.sizes, r.off, r.n = bufs[:min(len(bufs), p.batch)], sizes, offset, 0
	p.recv(0)
	n := r.n
	r.bufs, r.sizes = nil, nil
	return n, nil
}

// TryWrite implements emu.PollPort: it posts frames on the TX ring as far
// as it has room and free chunks, kicks the kernel once, and counts the
// frames the kernel has taken off the ring. A frame still on the ring is
// not counted: the driver passes it again first, and it is not posted
// twice (XDPPort.reported). A short count means the kernel had no room or
// budget; the driver waits for writability, and polling the socket drives
// the kernel's send in copy mode.
func (p *XDPPort) TryWrite(bufs [][]byte, offset int) (int, error) {
	p.wrMu.Lock()
	defer p.wrMu.Unlock()
	if p.closed.Load() {
		return 0, p.errClosed
	}
	prod := atomic.LoadUint32(p.tx.prod)
	onRing := int(prod - p.reported) // bufs[:onRing] are posted already
	if onRing > len(bufs) {
		return 0, fmt.Errorf("procnode: %s: TryWrite of %d frames, %d of an earlier call still on the ring", p.name, len(bufs), onRing)
	}
	p.reclaim()
	room := xdpTxFrames - (prod - atomic.LoadUint32(p.tx.cons))
	var ferr error
	for i := onRing; i < len(bufs) && room > 0 && len(p.txFree) > 0 && i-onRing < p.batch; i++ {
		if ferr = p.post(bufs[i][offset:], prod); ferr != nil {
			break
		}
		prod++
		room--
	}
	atomic.StoreUint32(p.tx.prod, prod)
	if _, err := p.kick(uintptr(p.sock)); err != nil {
		p.reported = prod // what is on the ring is lost to the driver
		return 0, err
	}
	n := int(atomic.LoadUint32(p.tx.cons) - p.reported)
	p.reported += uint32(n)
	p.TxPackets.Add(uint64(n))
	if ferr != nil && p.reported == prod { // everything before the oversize frame is out
		return n, ferr
	}
	return n, nil
}

// Close detaches the XDP program, closes the socket (unblocking a pending
// Read), waits for Read and Write to return and frees the rings and the
// UMEM.
func (p *XDPPort) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return p.errClosed
	}
	var err error
	if p.lnk != nil {
		err = p.lnk.Close()
		p.lnk = nil
	}
	p.closeMu.Lock()
	if p.file != nil { // polled: release closes the socket
		if cerr := p.file.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	p.closeMu.Unlock()
	p.rdMu.Lock()
	p.wrMu.Lock()
	p.release()
	p.wrMu.Unlock()
	p.rdMu.Unlock()
	return err
}

// release frees what NewXDPPort made (after a failure, or from Close).
func (p *XDPPort) release() {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.lnk != nil {
		p.lnk.Close()
		p.lnk = nil
	}
	if p.file != nil {
		p.file.Close()
		p.file = nil
	} else if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
	for _, r := range []*xdpRing{&p.fill, &p.comp, &p.rx, &p.tx} {
		if r.mem != nil {
			unix.Munmap(r.mem)
			*r = xdpRing{}
		}
	}
	if p.umem != nil {
		unix.Munmap(p.umem)
		p.umem = nil
	}
	if p.prog != nil {
		p.prog.Close()
		p.prog = nil
	}
	if p.xsks != nil {
		p.xsks.Close()
		p.xsks = nil
	}
}

// openXDP opens attachment a's XDP port and says on stderr which mode it
// got (XDPPort.Describe); if XDP is unavailable on the
// device and a.XDPFallback asks for it, it says so on stderr and opens the
// fallback backend instead.
func openXDP(a Attachment) (emu.Port, error) {
	x, err := NewXDPPort(XDPConfig{Dev: a.Dev, Mode: a.XDPMode, BatchSize: a.Batch})
	if err == nil {
		fmt.Fprintf(Notes, "procnode: %s\n", x.Describe()) // the mode it got
		return x, nil
	}
	if a.XDPFallback == "" || !errors.Is(err, ErrXDPUnavailable) {
		return nil, err
	}
	fmt.Fprintf(Notes, "%v; falling back to %s as asked (xdp fallback %s)\n", err, a.XDPFallback, a.XDPFallback)
	switch a.XDPFallback {
	case BackendPacket:
		return NewPacketPort(PacketConfig{Dev: a.Dev, BatchSize: a.Batch})
	case BackendRing:
		return NewRingPort(PacketConfig{Dev: a.Dev, BatchSize: a.Batch})
	}
	return nil, fmt.Errorf("procnode: xdp on %s: unknown fallback %q (want %q or %q)", a.Dev, a.XDPFallback, BackendPacket, BackendRing)
}
