package emu

// Port is a batched packet I/O endpoint: the backend behind an emulated
// port when a run is in real time (an in-memory pipe, a UDP socket, a TAP
// device). Its shape follows wireguard-go's tun.Device and conn.Bind.
//
// Buffers are always owned by the caller. Read fills bufs[i][offset:] with
// one frame each and reports its length in sizes[i]; the bytes before offset
// are headroom the backend may use for its own header. Write sends
// bufs[i][offset:] for each i; the backend may use bufs[i][:offset] as
// scratch (for example to prepend a header) but keeps no reference to any
// buffer after Write returns. Read and Write may be called from different
// goroutines at once; two concurrent Reads (or Writes) are not allowed.
type Port interface {
	// Name identifies the port in errors and counters, e.g. "udp:127.0.0.1:9000".
	Name() string
	// BatchSize is the largest number of frames one Read returns or one Write
	// sends in a single system call. Callers pass at most this many buffers.
	BatchSize() int
	// Read blocks until at least one frame is available, fills up to
	// len(bufs) buffers and returns how many. A frame longer than
	// len(bufs[i])-offset is dropped and counted by the backend, never
	// truncated. After Close, Read returns net.ErrClosed (wrapped).
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write sends every frame bufs[i][offset:] and returns how many were
	// sent; a short count comes with a non-nil error.
	Write(bufs [][]byte, offset int) (n int, err error)
	// Close releases the backend; it unblocks a pending Read.
	Close() error
}

// PollPort is a Port the real-time driver can read and write from its own
// loop (Linux): it waits for the port's fd in one epoll set with the other
// ports and the next timer, instead of handing frames to and from reader
// and writer goroutines. TAPPort, UDPPort and procnode's PacketPort and XDPPort
// implement it.
type PollPort interface {
	Port
	// PollFd switches the port to polled use and returns its non-blocking
	// fd, which the driver only waits on (epoll). The port may leave the Go
	// netpoller for it; afterwards the driver calls only TryRead, TryWrite
	// and Close.
	PollFd() (int, error)
	// TryRead is Read without waiting: 0 frames and a nil error when none
	// is queued.
	TryRead(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// TryWrite is Write without waiting: a short count with a nil error
	// when the backend would block (the driver waits for writability).
	TryWrite(bufs [][]byte, offset int) (n int, err error)
}
