package emu

import (
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr mirrors struct mmsghdr; Go pads it like C does.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// Verdicts of udpReceiver.result.
const (
	rxOK = iota
	rxTrunc
	rxForeign
)

// errnoERESTARTSYS is a kernel-internal errno that recvmmsg was seen to leak
// on this kind of VM; it means "try again".
const errnoERESTARTSYS = syscall.Errno(512)

// udpReceiver receives a batch of datagrams with recvmmsg into caller buffers
// without allocating: message headers, iovecs and source addresses are
// preallocated, and the callback handed to RawConn.Read is a method value
// made once. x/net's ReadBatch is not used on this path because it allocates
// a net.UDPAddr per received datagram.
type udpReceiver struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet4

	wantAddr [4]byte
	wantPort uint16 // in host order

	want, got int
	err       error
	fn        func(fd uintptr) bool
}

func (r *udpReceiver) init(batch int, remote netip.AddrPort) {
	r.hdrs = make([]mmsghdr, batch)
	r.iovs = make([]unix.Iovec, batch)
	r.names = make([]unix.RawSockaddrInet4, batch)
	r.wantAddr = remote.Addr().As4()
	r.wantPort = remote.Port()
	r.fn = r.syscall
}

// recv receives up to len(bufs) datagrams into bufs[i][offset:], blocking
// (in the netpoller) until at least one is there. It returns how many
// messages the kernel filled; result tells what each one holds.
func (r *udpReceiver) recv(rc syscall.RawConn, bufs [][]byte, offset int) (int, error) {
	r.prepare(bufs, offset)
	err := rc.Read(r.fn)
	r.release(bufs)
	if err != nil {
		return 0, err
	}
	return r.got, r.err
}

// try is recv on a non-blocking fd of its own (PollPort): one recvmmsg,
// 0 messages when none is queued.
func (r *udpReceiver) try(fd int, bufs [][]byte, offset int) (int, error) {
	r.prepare(bufs, offset)
	if !r.syscall(uintptr(fd)) {
		r.got = 0
	}
	r.release(bufs)
	return r.got, r.err
}

// prepare points the message headers at bufs[i][offset:].
func (r *udpReceiver) prepare(bufs [][]byte, offset int) {
	for i, b := range bufs {
		setMsg(&r.hdrs[i], &r.iovs[i], b[offset:], &r.names[i])
	}
	r.want, r.got, r.err = len(bufs), 0, nil
}

// release drops the references to the caller's buffers.
func (r *udpReceiver) release(bufs [][]byte) {
	for i := range bufs {
		r.iovs[i].Base = nil
	}
}

// syscall is the RawConn.Read callback: false means "wait until readable".
func (r *udpReceiver) syscall(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])),
			uintptr(r.want), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			r.got = int(n)
			return true
		case unix.EINTR, errnoERESTARTSYS:
			continue
		case unix.EAGAIN:
			return false
		default:
			r.err = os.NewSyscallError("recvmmsg", e)
			return true
		}
	}
}

// result returns the length of message i and whether it is a whole datagram
// from the expected source.
func (r *udpReceiver) result(i int) (int, int) {
	h := &r.hdrs[i]
	if h.hdr.Flags&unix.MSG_TRUNC != 0 {
		return 0, rxTrunc
	}
	sa := &r.names[i]
	pb := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port := uint16(pb[0])<<8 | uint16(pb[1])
	if sa.Family != unix.AF_INET || sa.Addr != r.wantAddr || port != r.wantPort {
		return 0, rxForeign
	}
	return int(h.len), rxOK
}

// setMsg points message m at one buffer b (through iov) and the IPv4
// address name (the source a receive fills in, or a send's destination).
func setMsg(m *mmsghdr, iov *unix.Iovec, b []byte, name *unix.RawSockaddrInet4) {
	if len(b) > 0 {
		iov.Base = &b[0]
	} else {
		iov.Base = nil
	}
	iov.SetLen(len(b))
	h := &m.hdr
	h.Name = (*byte)(unsafe.Pointer(name))
	h.Namelen = unix.SizeofSockaddrInet4
	h.Iov = iov
	h.SetIovlen(1)
	h.Control = nil
	h.SetControllen(0)
	h.Flags = 0
	m.len = 0
}

// udpSender sends a batch of datagrams to one address with sendmmsg on a
// non-blocking fd (PollPort's TryWrite) without allocating: message
// headers, iovecs and the destination are preallocated.
type udpSender struct {
	hdrs []mmsghdr
	iovs []unix.Iovec
	dst  unix.RawSockaddrInet4
}

func (s *udpSender) init(batch int, remote netip.AddrPort) {
	s.hdrs = make([]mmsghdr, batch)
	s.iovs = make([]unix.Iovec, batch)
	s.dst.Family = unix.AF_INET
	s.dst.Addr = remote.Addr().As4()
	pb := (*[2]byte)(unsafe.Pointer(&s.dst.Port))
	pb[0], pb[1] = byte(remote.Port()>>8), byte(remote.Port())
}

// try sends bufs[i][offset:] (at most the batch) with one sendmmsg and
// returns how many datagrams and bytes went; fewer than len(bufs) with a
// nil error means the socket buffer is full.
func (s *udpSender) try(fd int, bufs [][]byte, offset int) (int, uint64, error) {
	if len(bufs) == 0 {
		return 0, 0, nil
	}
	for i, b := range bufs {
		setMsg(&s.hdrs[i], &s.iovs[i], b[offset:], &s.dst)
	}
	var n int
	var err error
	for {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&s.hdrs[0])),
			uintptr(len(bufs)), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR || e == errnoERESTARTSYS {
			continue
		}
		if e != 0 && e != unix.EAGAIN {
			err = os.NewSyscallError("sendmmsg", e)
		}
		if e == 0 {
			n = int(r)
		}
		break
	}
	var nb uint64
	for i := range bufs {
		if i < n {
			nb += uint64(len(bufs[i]) - offset)
		}
		s.iovs[i].Base = nil
	}
	return n, nb, err
}
