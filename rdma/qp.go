package rdma

import (
	"errors"
	"math"
	"time"
)

// QP is one end of a Reliable Connection: a requester (it sends SEND and
// RDMA WRITE messages and completes them when acknowledged) and a responder
// (it executes the peer's requests in PSN order and acknowledges them).
//
// A QP is a sans-IO state machine, in the style of Linux rxe:
//
//	PostSend(wr)            queue a message                 (requester)
//	Receive(now, frame)     a frame arrived for this QP     (both)
//	HandleTimeout(now)      NextTimeout() has passed        (requester)
//	PollTransmit(now, buf)  next frame to send, or 0        (both)
//	NextTimeout()           when to call HandleTimeout
//	PollCompletion()        next work completion
//
// After any input, the caller drains PollTransmit until it returns 0, drains
// PollCompletion, and re-reads NextTimeout (an emu.Node does the first and
// the last with FlushQP). A QP is not safe for concurrent use. It allocates
// nothing in steady state.
//
// Reliability follows IBA chapter 9 as rxe implements it: 24-bit PSNs with
// wrap; AckReq on the last packet of each message (and every AckEvery
// packets, and on the packet that fills the window); a responder that
// executes only the expected PSN, answers a gap with one NAK (PSN sequence
// error) carrying the expected PSN, re-ACKs duplicates without redelivering
// them, and coalesces ACKs until the caller polls; a requester that keeps at
// most MaxUnacked PSNs outstanding and goes back N to the oldest
// unacknowledged PSN on a NAK or when the local ACK timeout expires, giving
// up with StatusRetryExceeded after RetryCount consecutive retries.
type QP struct {
	cfg     Config
	hdr     FrameHeader // addressing template for every frame
	timeout time.Duration
	state   QPState
	err     error
	stats   Stats
	// ver counts the calls that may change what PollTransmit or
	// NextTimeout return (every input and every frame sent): FlushQP
	// skips a QP that has had none since its last flush.
	ver uint64

	// Requester.
	sq         []wqe // ring
	sqHead     int
	sqLen      int
	postPSN    uint32 // PSN of the next posted message's first packet
	txIdx      int    // wqe being transmitted, relative to sqHead
	txPkt      int    // packet index within that wqe
	txPSN      uint32 // PSN of the next packet to transmit
	compPSN    uint32 // oldest unacknowledged PSN
	sentHigh   uint32 // one past the highest PSN ever sent
	noAck      int    // packets sent since the last AckReq
	retryLeft  int
	rnrLeft    int
	timerOn    bool
	timerAt    time.Duration
	rnrWait    bool
	rnrUntil   time.Duration
	haveNAK    bool
	lastNAKPSN uint32

	// Responder.
	ePSN     uint32 // expected PSN
	msn      uint32
	nakSent  bool
	inMsg    bool
	msgWrite bool
	recvBuf  []byte
	wrOff    uint64 // next write offset into Memory
	wrEnd    uint64 // end of the write
	wrLen    uint32 // DMA length of the write in progress
	resp     respKind
	respPSN  uint32
	respSyn  Syndrome
	rxFrame  Frame

	// Completions.
	cq     []Completion
	cqHead int
}

type respKind uint8

const (
	respNone respKind = iota
	respACK
	respNAK
)

type wqe struct {
	wr       WorkRequest
	firstPSN uint32
	npkts    int
}

// QPState is the state of a QP.
type QPState uint8

// QP states. A QP is created ready to send (RTS); it moves to Error when a
// retry counter is exhausted, the peer NAKs a request as invalid, or the
// responder detects a fatal protocol error. It never leaves Error.
const (
	StateRTS QPState = iota
	StateError
)

func (s QPState) String() string {
	if s == StateRTS {
		return "RTS"
	}
	return "Error"
}

// WROpcode selects what a work request does.
type WROpcode uint8

// Work request opcodes.
const (
	WRSend WROpcode = iota
	WRSendImm
	WRWrite
	WRWriteImm
)

func (o WROpcode) String() string {
	switch o {
	case WRSend:
		return "SEND"
	case WRSendImm:
		return "SEND_WITH_IMM"
	case WRWrite:
		return "RDMA_WRITE"
	case WRWriteImm:
		return "RDMA_WRITE_WITH_IMM"
	}
	return "WROpcode(?)"
}

// WorkRequest is a message to send. Data is referenced, not copied: it must
// not change until the request completes.
type WorkRequest struct {
	ID         uint64
	Op         WROpcode
	Data       []byte
	Imm        uint32 // for WRSendImm and WRWriteImm
	RemoteAddr uint64 // for writes: offset into the peer's Memory
	RKey       uint32 // for writes
	Solicited  bool   // set SE on the last packet
}

// Status is the outcome of a work request.
type Status uint8

// Completion statuses (after ibv_wc_status).
const (
	StatusSuccess Status = iota
	StatusRetryExceeded
	StatusRNRRetryExceeded
	StatusRemoteInvalidRequest
	StatusRemoteAccessError
	StatusRemoteOperationalError
	StatusFlushed
)

var statusNames = [...]string{
	StatusSuccess:                "success",
	StatusRetryExceeded:          "transport retry counter exceeded",
	StatusRNRRetryExceeded:       "RNR retry counter exceeded",
	StatusRemoteInvalidRequest:   "remote invalid request",
	StatusRemoteAccessError:      "remote access error",
	StatusRemoteOperationalError: "remote operational error",
	StatusFlushed:                "flushed",
}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "Status(?)"
}

// CompletionOpcode says what a completion completes.
type CompletionOpcode uint8

// Completion opcodes.
const (
	CompSend         CompletionOpcode = iota // a posted WRSend/WRSendImm
	CompWrite                                // a posted WRWrite/WRWriteImm
	CompRecv                                 // an incoming SEND message
	CompRecvWriteImm                         // an incoming RDMA WRITE with immediate
)

func (o CompletionOpcode) String() string {
	switch o {
	case CompSend:
		return "SEND"
	case CompWrite:
		return "RDMA_WRITE"
	case CompRecv:
		return "RECV"
	case CompRecvWriteImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "CompletionOpcode(?)"
}

// Completion reports a finished work request (requester) or an incoming
// message (responder). Requester completions come in posting order.
type Completion struct {
	WRID    uint64 // the WorkRequest.ID (requester completions)
	Opcode  CompletionOpcode
	Status  Status
	ByteLen int
	Imm     uint32
	HasImm  bool
	// Solicited reports the SE bit of an incoming message.
	Solicited bool
	// Data is the message of a CompRecv completion. It aliases the QP's
	// reassembly buffer or the frame passed to Receive and is valid only
	// until the next call to Receive.
	Data []byte
}

// Stats counts a QP's traffic and the reasons frames were dropped.
type Stats struct {
	TxPackets, TxBytes     uint64
	TxRetransmits          uint64 // data packets sent more than once
	TxACKs, TxNAKs         uint64
	RxPackets              uint64 // frames handed to Receive
	RxBadICRC              uint64 // dropped: ICRC mismatch
	RxMalformed            uint64 // dropped: structure (see Frame.Parse) or not an RC opcode
	RxWrongQP              uint64 // dropped: BTH DestQP is not this QP
	RxWrongSource          uint64 // dropped: the IPv4 source is not the QP's remote address
	RxUnsupported          uint64 // dropped: opcode the QP does not execute
	RxDuplicates           uint64 // requests with a PSN already executed
	RxOutOfSequence        uint64 // requests beyond the expected PSN
	RxACKs, RxNAKs         uint64
	RxStaleACKs            uint64 // ACK/NAK outside the outstanding window
	Timeouts               uint64 // local ACK timeouts that caused a retry
	GoBackN                uint64 // go-back-N restarts (NAK, timeout, RNR)
	MessagesSent           uint64 // requester completions with success
	MessagesReceived       uint64 // messages executed by the responder
	RxDroppedInErrorState  uint64
	RxCE                   uint64 // accepted frames marked ECN CE (congestion)
	RxProtocolErrorsNAKed  uint64 // invalid/access errors the responder NAKed
	CompletionQueueHighLen int
}

// Errors reported by the QP.
var (
	ErrBadICRC       = errors.New("rdma: ICRC mismatch")
	ErrWrongSource   = errors.New("rdma: frame not from the QP's remote address")
	ErrWrongQP       = errors.New("rdma: frame for another QP")
	ErrQPError       = errors.New("rdma: QP is in the error state")
	ErrSendQueueFull = errors.New("rdma: send queue full")
	ErrMessageSize   = errors.New("rdma: message too long")
	ErrBadConfig     = errors.New("rdma: invalid QP configuration")

	ErrRetryExceeded    = errors.New("rdma: transport retry counter exceeded (no ACK from the peer)")
	ErrRNRRetryExceeded = errors.New("rdma: RNR retry counter exceeded")
	ErrRemoteInvalid    = errors.New("rdma: peer NAKed a request as invalid")
	ErrRemoteAccess     = errors.New("rdma: peer NAKed a request with a remote access error")
	ErrRemoteOp         = errors.New("rdma: peer NAKed a request with a remote operational error")
	ErrLocalProtocol    = errors.New("rdma: peer violated the RC protocol (opcode sequence or length)")
	ErrLocalAccess      = errors.New("rdma: peer's RDMA WRITE violated the memory region")
)

// Config describes a QP and its connection.
type Config struct {
	Local, Remote Endpoint
	// QPN and RemoteQPN are the 24-bit local and peer QP numbers; neither
	// may be 0 or 1 (reserved for management datagrams).
	QPN, RemoteQPN uint32
	// SrcPort is the UDP source port; 0 means SourcePort(QPN).
	SrcPort uint16
	// MTU is the path MTU: 256, 512, 1024, 2048 or 4096 payload bytes.
	MTU int
	// SendPSN is the PSN of the first request this QP sends; RecvPSN the
	// PSN of the first request it expects (the peer's SendPSN).
	SendPSN, RecvPSN uint32
	// Timeout is the local ACK timeout exponent: 4.096 µs × 2^Timeout.
	// 0 disables the timer. Values above 31 are invalid.
	Timeout uint8
	// TimeoutStretch multiplies the local ACK timeout (0: by 1). An
	// emulation scaled in time (slower links, longer delays) stretches
	// its QPs' timeouts by the same factor, keeping the exponent of the
	// true-scale link; nothing on the wire changes.
	TimeoutStretch float64
	// RetryCount (0-7) is how many consecutive retries (timeouts or NAKs
	// without progress) the requester makes before giving up.
	RetryCount int
	// RNRRetry (0-7) bounds retries after RNR NAKs; 7 means unlimited.
	RNRRetry int
	// MaxUnacked bounds the outstanding PSNs; 0 means 128.
	MaxUnacked int
	// AckEvery requests an ACK at least every AckEvery packets; 0 means
	// min(64, MaxUnacked/2).
	AckEvery int
	// SendQueueDepth bounds posted, uncompleted work requests; 0 means 4096.
	SendQueueDepth int
	// MaxMessage bounds a message's length; 0 means 8 MiB.
	MaxMessage int
	// TOS is the IPv4 TOS byte: DSCP<<2 | ECN. 2 is ECT(0).
	TOS uint8
	// PKey is the partition key; 0 means DefaultPKey.
	PKey uint16
	// Memory is the region peers may RDMA WRITE into, addressed by offset
	// (RETH VA) and guarded by RKey.
	Memory []byte
	RKey   uint32
}

// LocalACKTimeout returns 4.096 µs × 2^exp.
func LocalACKTimeout(exp uint8) time.Duration {
	return time.Duration(4096) << exp
}

// ACKTimeout returns the local ACK timeout a QP of c runs with:
// LocalACKTimeout(Timeout) × TimeoutStretch (a stretch of 0 counts as 1),
// or 0 when Timeout is 0 (no timer). Anything sized in ACK timeouts (a
// fallback that must wait for RC to recover a loss) takes it from here,
// so a stretched QP's is stretched too.
func (c *Config) ACKTimeout() time.Duration {
	if c.Timeout == 0 {
		return 0
	}
	d := LocalACKTimeout(c.Timeout)
	if c.TimeoutStretch > 0 {
		d = time.Duration(math.Round(float64(d) * c.TimeoutStretch))
	}
	return d
}

// NewQP returns a QP in the RTS state.
func NewQP(cfg Config) (*QP, error) {
	switch cfg.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		return nil, ErrBadConfig
	}
	if cfg.QPN <= 1 || cfg.QPN > PSNMask || cfg.RemoteQPN <= 1 || cfg.RemoteQPN > PSNMask {
		return nil, ErrBadConfig
	}
	if cfg.Timeout > 31 || !(cfg.TimeoutStretch >= 0 && cfg.TimeoutStretch <= 1e6) || cfg.RetryCount < 0 || cfg.RetryCount > 7 || cfg.RNRRetry < 0 || cfg.RNRRetry > 7 {
		return nil, ErrBadConfig
	}
	if !cfg.Local.IP.Is4() || !cfg.Remote.IP.Is4() {
		return nil, ErrAddress
	}
	if cfg.MaxUnacked == 0 {
		cfg.MaxUnacked = 128
	}
	if cfg.MaxUnacked < 1 || cfg.MaxUnacked > 1<<22 {
		return nil, ErrBadConfig
	}
	if cfg.AckEvery == 0 {
		cfg.AckEvery = min(64, max(1, cfg.MaxUnacked/2))
	}
	if cfg.SendQueueDepth == 0 {
		cfg.SendQueueDepth = 4096
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = 8 << 20
	}
	if cfg.SrcPort == 0 {
		cfg.SrcPort = SourcePort(cfg.QPN)
	}
	cfg.SendPSN &= PSNMask
	cfg.RecvPSN &= PSNMask
	q := &QP{
		cfg:       cfg,
		sq:        make([]wqe, cfg.SendQueueDepth),
		postPSN:   cfg.SendPSN,
		txPSN:     cfg.SendPSN,
		compPSN:   cfg.SendPSN,
		sentHigh:  cfg.SendPSN,
		retryLeft: cfg.RetryCount,
		rnrLeft:   cfg.RNRRetry,
		ePSN:      cfg.RecvPSN,
	}
	q.timeout = cfg.ACKTimeout()
	q.hdr = FrameHeader{
		Src: cfg.Local, Dst: cfg.Remote,
		SrcPort: cfg.SrcPort, TOS: cfg.TOS,
		PKey: cfg.PKey, DestQP: cfg.RemoteQPN,
	}
	return q, nil
}

// Config returns the QP's configuration with defaults filled in.
func (q *QP) Config() Config { return q.cfg }

// State returns the QP state.
func (q *QP) State() QPState { return q.state }

// Err returns why the QP entered the error state, or nil.
func (q *QP) Err() error { return q.err }

// Stats returns the QP's counters.
func (q *QP) Stats() Stats { return q.stats }

// MaxFrameLen is the size of buffer PollTransmit needs.
func (q *QP) MaxFrameLen() int { return q.cfg.MTU + MaxOverhead }

// Outstanding returns the number of posted, uncompleted work requests.
func (q *QP) Outstanding() int { return q.sqLen }

// SendPSN returns the PSN the next posted message will start at.
func (q *QP) SendPSN() uint32 { return q.postPSN }

// ExpectedPSN returns the responder's expected PSN.
func (q *QP) ExpectedPSN() uint32 { return q.ePSN }

// PostSend queues a work request. It fails when the QP is in the error
// state, the send queue is full or the message is too long.
func (q *QP) PostSend(wr WorkRequest) error {
	q.ver++
	if q.state == StateError {
		return ErrQPError
	}
	if q.sqLen == len(q.sq) {
		return ErrSendQueueFull
	}
	if len(wr.Data) > q.cfg.MaxMessage {
		return ErrMessageSize
	}
	n := (len(wr.Data) + q.cfg.MTU - 1) / q.cfg.MTU
	if n == 0 {
		n = 1
	}
	i := (q.sqHead + q.sqLen) % len(q.sq)
	q.sq[i] = wqe{wr: wr, firstPSN: q.postPSN, npkts: n}
	q.sqLen++
	q.postPSN = PSNAdd(q.postPSN, n)
	return nil
}

// PollCompletion returns the next completion, if any.
func (q *QP) PollCompletion() (Completion, bool) {
	if q.cqHead == len(q.cq) {
		return Completion{}, false
	}
	q.ver++
	c := q.cq[q.cqHead]
	q.cq[q.cqHead] = Completion{}
	q.cqHead++
	if q.cqHead == len(q.cq) {
		q.cq = q.cq[:0]
		q.cqHead = 0
	}
	return c, true
}

func (q *QP) complete(c Completion) {
	q.cq = append(q.cq, c)
	if n := len(q.cq) - q.cqHead; n > q.stats.CompletionQueueHighLen {
		q.stats.CompletionQueueHighLen = n
	}
}

// NextTimeout returns when HandleTimeout must next be called.
func (q *QP) NextTimeout() (time.Duration, bool) {
	if q.state == StateError {
		return 0, false
	}
	switch {
	case q.rnrWait && q.timerOn:
		return min(q.rnrUntil, q.timerAt), true
	case q.rnrWait:
		return q.rnrUntil, true
	case q.timerOn:
		return q.timerAt, true
	}
	return 0, false
}

// HandleTimeout runs the timers that have expired at now.
func (q *QP) HandleTimeout(now time.Duration) {
	q.ver++
	if q.state == StateError {
		return
	}
	if q.rnrWait && now >= q.rnrUntil {
		q.rnrWait = false
		q.goBack(q.compPSN)
		q.armTimer(now)
	}
	if q.timerOn && now >= q.timerAt {
		q.timerOn = false
		if PSNDiff(q.sentHigh, q.compPSN) <= 0 {
			return // nothing outstanding
		}
		q.stats.Timeouts++
		if q.retryLeft == 0 {
			q.fail(ErrRetryExceeded, StatusRetryExceeded)
			return
		}
		q.retryLeft--
		q.goBack(q.compPSN)
		q.armTimer(now)
	}
}

func (q *QP) armTimer(now time.Duration) {
	if q.timeout == 0 {
		return
	}
	q.timerOn = true
	q.timerAt = now + q.timeout
}

// goBack restarts transmission at psn (go-back-N).
func (q *QP) goBack(psn uint32) {
	q.stats.GoBackN++
	q.setCursor(psn)
	q.noAck = 0
}

// setCursor points the transmit cursor at psn, which must lie within the
// posted work requests (or at their end).
func (q *QP) setCursor(psn uint32) {
	i := 0
	for ; i < q.sqLen; i++ {
		w := &q.sq[(q.sqHead+i)%len(q.sq)]
		if PSNDiff(psn, PSNAdd(w.firstPSN, w.npkts)) < 0 {
			break
		}
	}
	q.txIdx = i
	q.txPkt = 0
	if i < q.sqLen {
		w := &q.sq[(q.sqHead+i)%len(q.sq)]
		q.txPkt = int(PSNDiff(psn, w.firstPSN))
	}
	q.txPSN = psn
}

// fail moves the QP to the error state: the oldest work request completes
// with status, the rest are flushed.
func (q *QP) fail(err error, status Status) {
	if q.state == StateError {
		return
	}
	q.state = StateError
	q.err = err
	q.timerOn = false
	q.rnrWait = false
	for q.sqLen > 0 {
		w := &q.sq[q.sqHead]
		q.complete(Completion{WRID: w.wr.ID, Opcode: wrCompOp(w.wr.Op), Status: status, ByteLen: len(w.wr.Data)})
		status = StatusFlushed
		q.popWQE()
	}
}

func (q *QP) popWQE() {
	q.sq[q.sqHead] = wqe{}
	q.sqHead = (q.sqHead + 1) % len(q.sq)
	q.sqLen--
	if q.txIdx > 0 {
		q.txIdx--
	}
}

func wrCompOp(o WROpcode) CompletionOpcode {
	if o == WRWrite || o == WRWriteImm {
		return CompWrite
	}
	return CompSend
}

// ackUpTo acknowledges every PSN before psn: completes the work requests
// that end before it and advances the oldest unacknowledged PSN.
func (q *QP) ackUpTo(now time.Duration, psn uint32) {
	for q.sqLen > 0 {
		w := &q.sq[q.sqHead]
		if PSNDiff(psn, PSNAdd(w.firstPSN, w.npkts)) < 0 {
			break
		}
		q.complete(Completion{WRID: w.wr.ID, Opcode: wrCompOp(w.wr.Op), Status: StatusSuccess, ByteLen: len(w.wr.Data)})
		q.stats.MessagesSent++
		q.popWQE()
	}
	q.compPSN = psn
	q.retryLeft = q.cfg.RetryCount
	q.rnrLeft = q.cfg.RNRRetry
	q.haveNAK = false
	if PSNDiff(q.txPSN, psn) < 0 {
		q.setCursor(psn)
	}
	if PSNDiff(q.sentHigh, psn) > 0 {
		q.armTimer(now)
	} else {
		q.timerOn = false
	}
}

// Receive processes one incoming frame addressed to this QP. It returns an
// error when the frame was dropped: bad ICRC, malformed, another QP's,
// unsupported, or the QP is in the error state. Protocol events (duplicates,
// gaps, stale ACKs) are not errors; they are counted in Stats.
func (q *QP) Receive(now time.Duration, frame []byte) error {
	return q.ReceiveSealed(now, frame, false)
}

// ReceiveSealed is Receive for a frame whose ICRC the caller may already
// know to be right (sealed, as CheckSealed: emu.Packet.Sealed): a sealed
// frame's ICRC is not recomputed; everything else is checked.
func (q *QP) ReceiveSealed(now time.Duration, frame []byte, sealed bool) error {
	q.ver++
	q.stats.RxPackets++
	if !CheckSealed(frame, sealed) {
		q.stats.RxBadICRC++
		return ErrBadICRC
	}
	f := &q.rxFrame
	if err := f.parseRC(frame); err != nil { // a UC opcode too
		q.stats.RxMalformed++
		return err
	}
	if f.BTH.DestQP() != q.cfg.QPN {
		q.stats.RxWrongQP++
		return ErrWrongQP
	}
	if q.cfg.Remote.IP.Is4() && IPv4(f.IPv4).Src() != q.cfg.Remote.IP {
		// A connected QP takes packets from its peer only (as an RNIC
		// checks the source against the QP's remote address).
		q.stats.RxWrongSource++
		return ErrWrongSource
	}
	if q.state == StateError {
		q.stats.RxDroppedInErrorState++
		return ErrQPError
	}
	if f.IPv4[1]&3 == 3 {
		q.stats.RxCE++
	}
	op := f.BTH.Opcode()
	switch {
	case op == OpAck:
		q.receiveAck(now, f)
	case op.IsSend() || op.IsWrite():
		q.receiveRequest(f)
	default:
		q.stats.RxUnsupported++
		return ErrUnsupportedOpcode
	}
	return nil
}

func (q *QP) receiveAck(now time.Duration, f *Frame) {
	psn := f.BTH.PSN()
	syn := f.AETH.Syndrome()
	outstanding := PSNDiff(q.sentHigh, q.compPSN)
	d := PSNDiff(psn, q.compPSN)
	if syn.IsACK() {
		q.stats.RxACKs++
		if d < 0 || d >= outstanding {
			q.stats.RxStaleACKs++
			return
		}
		q.ackUpTo(now, PSNAdd(psn, 1))
		return
	}
	q.stats.RxNAKs++
	// A NAK carries the PSN of the request it refuses, which must be
	// outstanding; every PSN before it is implicitly acknowledged.
	if d < 0 || d >= outstanding {
		q.stats.RxStaleACKs++
		return
	}
	progress := d > 0
	if progress {
		q.ackUpTo(now, psn)
	}
	switch {
	case syn == SyndromeNAKPSNSeq:
		if !progress && q.haveNAK && q.lastNAKPSN == psn {
			return // duplicate NAK for a retry already under way
		}
		if !progress {
			if q.retryLeft == 0 {
				q.fail(ErrRetryExceeded, StatusRetryExceeded)
				return
			}
			q.retryLeft--
		}
		q.haveNAK = true
		q.lastNAKPSN = psn
		q.goBack(psn)
		q.armTimer(now)
	case syn.IsRNR():
		if q.cfg.RNRRetry != 7 {
			if q.rnrLeft == 0 {
				q.fail(ErrRNRRetryExceeded, StatusRNRRetryExceeded)
				return
			}
			q.rnrLeft--
		}
		q.rnrWait = true
		q.rnrUntil = now + RNRDelay(syn.Value())
		q.setCursor(psn) // pause here until the RNR delay passes
	case syn == SyndromeNAKAccess:
		q.fail(ErrRemoteAccess, StatusRemoteAccessError)
	case syn == SyndromeNAKOpError:
		q.fail(ErrRemoteOp, StatusRemoteOperationalError)
	default:
		q.fail(ErrRemoteInvalid, StatusRemoteInvalidRequest)
	}
}

var rnrMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// RNRDelay returns the delay an RNR NAK timer code (0-31) asks for.
func RNRDelay(code uint8) time.Duration {
	return time.Duration(rnrMicros[code&31]) * time.Microsecond
}

// receiveRequest is the responder: it executes the expected PSN only.
func (q *QP) receiveRequest(f *Frame) {
	psn := f.BTH.PSN()
	d := PSNDiff(psn, q.ePSN)
	if d > 0 {
		q.stats.RxOutOfSequence++
		if !q.nakSent {
			q.nakSent = true
			q.setResp(respNAK, q.ePSN, SyndromeNAKPSNSeq)
		}
		return
	}
	if d < 0 {
		// Already executed: re-ACK the latest PSN, never redeliver.
		q.stats.RxDuplicates++
		if q.resp == respNone {
			q.setResp(respACK, PSNAdd(q.ePSN, -1), SyndromeACK)
		}
		return
	}
	op := f.BTH.Opcode()
	if syn, err := q.checkRequest(f, op); err != nil {
		q.stats.RxProtocolErrorsNAKed++
		q.setResp(respNAK, psn, syn)
		q.responderFail(err)
		return
	}
	if op.IsSend() {
		q.executeSend(f, op)
	} else {
		q.executeWrite(f, op)
	}
	q.ePSN = PSNAdd(psn, 1)
	q.nakSent = false
	if op.IsLast() {
		q.msn = (q.msn + 1) & PSNMask
		q.stats.MessagesReceived++
		q.inMsg = false
	} else {
		q.inMsg = true
		q.msgWrite = op.IsWrite()
	}
	if f.BTH.AckReq() || q.resp == respNAK {
		q.setResp(respACK, psn, SyndromeACK)
	}
}

// setResp records the acknowledgement to send next; a newer one replaces an
// older one (ACK coalescing), since an ACK or NAK for PSN n acknowledges
// everything before n.
func (q *QP) setResp(k respKind, psn uint32, syn Syndrome) {
	q.resp, q.respPSN, q.respSyn = k, psn, syn
}

// responderFail moves the QP to the error state after the responder found a
// fatal protocol error; the NAK already queued is still sent.
func (q *QP) responderFail(err error) {
	resp, rpsn, rsyn := q.resp, q.respPSN, q.respSyn
	q.fail(err, StatusFlushed) // our own requests are not at fault
	q.resp, q.respPSN, q.respSyn = resp, rpsn, rsyn
}

// checkRequest validates opcode sequence, lengths and memory access of the
// expected request.
func (q *QP) checkRequest(f *Frame, op Opcode) (Syndrome, error) {
	if q.inMsg {
		if !op.IsMiddle() && !(op.IsLast() && !op.IsFirst()) || op.IsWrite() != q.msgWrite {
			return SyndromeNAKInvalid, ErrLocalProtocol
		}
	} else if !op.IsFirst() {
		return SyndromeNAKInvalid, ErrLocalProtocol
	}
	n := len(f.Payload)
	mtu := q.cfg.MTU
	switch {
	case op.IsFirst() && op.IsLast():
		if n > mtu {
			return SyndromeNAKInvalid, ErrLocalProtocol
		}
	case op.IsLast():
		if n < 1 || n > mtu {
			return SyndromeNAKInvalid, ErrLocalProtocol
		}
	default: // First, Middle
		if n != mtu || f.Pad != 0 {
			return SyndromeNAKInvalid, ErrLocalProtocol
		}
	}
	if op.IsSend() {
		if op.IsFirst() {
			if n > q.cfg.MaxMessage {
				return SyndromeNAKInvalid, ErrLocalProtocol
			}
		} else if len(q.recvBuf)+n > q.cfg.MaxMessage {
			return SyndromeNAKInvalid, ErrLocalProtocol
		}
		return 0, nil
	}
	if op.IsFirst() {
		r := f.RETH
		l := uint64(r.DMALength())
		if l > 1<<31 || uint64(n) > l || (op.IsLast() && uint64(n) != l) {
			return SyndromeNAKInvalid, ErrLocalProtocol
		}
		if l > 0 && (r.RKey() != q.cfg.RKey || r.VA() > uint64(len(q.cfg.Memory)) || l > uint64(len(q.cfg.Memory))-r.VA()) {
			return SyndromeNAKAccess, ErrLocalAccess
		}
		return 0, nil
	}
	if q.wrOff+uint64(n) > q.wrEnd || (op.IsLast() && q.wrOff+uint64(n) != q.wrEnd) {
		return SyndromeNAKInvalid, ErrLocalProtocol
	}
	return 0, nil
}

func (q *QP) executeSend(f *Frame, op Opcode) {
	switch {
	case op.IsFirst() && op.IsLast():
		q.deliverRecv(f, op, f.Payload)
	case op.IsFirst():
		q.recvBuf = append(q.recvBuf[:0], f.Payload...)
	default:
		q.recvBuf = append(q.recvBuf, f.Payload...)
		if op.IsLast() {
			q.deliverRecv(f, op, q.recvBuf)
		}
	}
}

func (q *QP) deliverRecv(f *Frame, op Opcode, data []byte) {
	c := Completion{Opcode: CompRecv, ByteLen: len(data), Data: data, Solicited: f.BTH.SolicitedEvent()}
	if op.HasImm() {
		c.HasImm, c.Imm = true, f.ImmDt.Imm()
	}
	q.complete(c)
}

func (q *QP) executeWrite(f *Frame, op Opcode) {
	if op.IsFirst() {
		q.wrOff = f.RETH.VA()
		q.wrLen = f.RETH.DMALength()
		q.wrEnd = q.wrOff + uint64(q.wrLen)
	}
	if n := len(f.Payload); n > 0 {
		copy(q.cfg.Memory[q.wrOff:q.wrOff+uint64(n)], f.Payload)
		q.wrOff += uint64(n)
	}
	if op.IsLast() && op.HasImm() {
		q.complete(Completion{Opcode: CompRecvWriteImm, ByteLen: int(q.wrLen), HasImm: true, Imm: f.ImmDt.Imm(), Solicited: f.BTH.SolicitedEvent()})
	}
}

// PollTransmit writes the next frame to send into buf and returns its
// length, or 0 when there is nothing to send now. Acknowledgements go first,
// then request packets while the window allows. buf must hold MaxFrameLen
// bytes; PollTransmit panics otherwise.
func (q *QP) PollTransmit(now time.Duration, buf []byte) int {
	return q.pollTransmit(now, buf, true)
}

// PollTransmitDeferred is PollTransmit without the ICRC: the frame's last
// four bytes are left for SealICRC to write when the frame is seen
// (emu.Packet.Defer).
func (q *QP) PollTransmitDeferred(now time.Duration, buf []byte) int {
	return q.pollTransmit(now, buf, false)
}

func (q *QP) pollTransmit(now time.Duration, buf []byte, seal bool) int {
	if len(buf) < q.MaxFrameLen() {
		panic("rdma: PollTransmit buffer shorter than MaxFrameLen")
	}
	h := &q.hdr
	if q.resp != respNone {
		h.Opcode = OpAck
		h.PSN = q.respPSN
		h.Syndrome = q.respSyn
		h.MSN = q.msn
		h.AckReq = false
		h.SolicitedEvent = false
		if q.resp == respNAK {
			q.stats.TxNAKs++
		} else {
			q.stats.TxACKs++
		}
		q.resp = respNone
		return q.emit(buf, nil, seal)
	}
	if q.state == StateError || q.rnrWait || q.txIdx >= q.sqLen {
		return 0
	}
	if PSNDiff(q.txPSN, q.compPSN) >= int32(q.cfg.MaxUnacked) {
		return 0
	}
	w := &q.sq[(q.sqHead+q.txIdx)%len(q.sq)]
	mtu := q.cfg.MTU
	off := q.txPkt * mtu
	end := min(off+mtu, len(w.wr.Data))
	payload := w.wr.Data[off:end]
	first, last := q.txPkt == 0, q.txPkt == w.npkts-1
	write := w.wr.Op == WRWrite || w.wr.Op == WRWriteImm
	imm := w.wr.Op == WRSendImm || w.wr.Op == WRWriteImm
	h.Opcode = pickOpcode(write, imm, first, last)
	if first && write {
		h.VA = w.wr.RemoteAddr
		h.RKey = w.wr.RKey
		h.DMALength = uint32(len(w.wr.Data))
	}
	h.Imm = w.wr.Imm
	h.SolicitedEvent = last && w.wr.Solicited
	h.PSN = q.txPSN
	q.noAck++
	fillsWindow := PSNDiff(PSNAdd(q.txPSN, 1), q.compPSN) >= int32(q.cfg.MaxUnacked)
	h.AckReq = last || q.noAck >= q.cfg.AckEvery || fillsWindow
	if h.AckReq {
		q.noAck = 0
	}
	if PSNDiff(q.txPSN, q.sentHigh) < 0 {
		q.stats.TxRetransmits++
	} else {
		q.sentHigh = PSNAdd(q.txPSN, 1)
	}
	q.txPSN = PSNAdd(q.txPSN, 1)
	q.txPkt++
	if q.txPkt == w.npkts {
		q.txIdx++
		q.txPkt = 0
	}
	if !q.timerOn {
		q.armTimer(now)
	}
	return q.emit(buf, payload, seal)
}

func (q *QP) emit(buf, payload []byte, seal bool) int {
	q.ver++
	n, err := q.hdr.encode(buf, payload, seal)
	if err != nil {
		panic("rdma: encode: " + err.Error()) // unreachable: config and sizes were checked
	}
	q.hdr.ID++
	q.stats.TxPackets++
	q.stats.TxBytes += uint64(n)
	return n
}

func pickOpcode(write, imm, first, last bool) Opcode {
	var base Opcode // SEND First
	if write {
		base = OpRDMAWriteFirst
	}
	switch {
	case first && last:
		if write {
			if imm {
				return OpRDMAWriteOnlyImm
			}
			return OpRDMAWriteOnly
		}
		if imm {
			return OpSendOnlyImm
		}
		return OpSendOnly
	case first:
		return base
	case last:
		if imm {
			return base + 3 // Last with Immediate
		}
		return base + 2
	}
	return base + 1
}
