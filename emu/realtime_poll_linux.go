//go:build linux

package emu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const pollSupported = true

const (
	// pollTurnBatches bounds the batches read from one port in one turn
	// of the loop, so that one busy port cannot starve the timers.
	pollTurnBatches = 4
	// pollMaxPending bounds the frames queued for one polled backend that
	// would block; more are dropped (ExtStats.DropBackpressure), as the
	// goroutine driver drops beyond its writer's 256 batches.
	pollMaxPending = 256 * DefaultTAPBatch
	// pollTimerSlack is the loop thread's timer slack while it runs (the
	// default, 50 µs, would add that much to every wait).
	pollTimerSlack = 1000 // ns
)

// pollState is a polled port's part of the loop.
type pollState struct {
	idx      int
	fd, ep   int
	spare    []*Packet // the packets the next read fills
	bufs     [][]byte  // their buffers
	sizes    []int
	batches  [][]*Packet // the turn's batches (emptied by ingest in the same turn)
	wbufs    [][]byte
	readable bool // the last epoll reported input (or a read hit its cap)
	outArmed bool // EPOLLOUT is in the set: frames wait for writability
	dead     bool // reading failed: no longer polled
}

// poller is the loop's epoll set: every polled port's fd, and an eventfd
// through which other goroutines wake the loop.
type poller struct {
	ep, ev   int
	events   []unix.EpollEvent
	ts       unix.Timespec
	noPwait2 bool // epoll_pwait2 (Linux 5.11) missing: millisecond waits and a spin
	sleeping atomic.Bool
	one      [8]byte
	drain    [8]byte
}

func newPoller() (*poller, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	ev, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	p := &poller{ep: ep, ev: ev, events: make([]unix.EpollEvent, 64)}
	p.one[0] = 1 // host order on little-endian; any non-zero count wakes
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ev, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1}); err != nil {
		p.close()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return p, nil
}

func (p *poller) close() { unix.Close(p.ev); unix.Close(p.ep) }

// wake wakes the loop if it sleeps in epoll. The caller has made its work
// visible first; the loop rechecks for work after announcing it sleeps.
func (p *poller) wake() {
	if p.sleeping.Load() && p.sleeping.CompareAndSwap(true, false) {
		unix.Write(p.ev, p.one[:])
	}
}

func (p *poller) ctl(op, fd int, events uint32, idx int) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(idx)}
	return unix.EpollCtl(p.ep, op, fd, &ev)
}

// wait waits up to d (d ≤ 0: only polls) and marks the ports it reports.
// Without epoll_pwait2 a wait under a millisecond only polls (the caller
// spins).
func (p *poller) wait(d time.Duration, ports []*extPort) {
	var r uintptr
	var e unix.Errno
	switch {
	case d > 0 && !p.noPwait2:
		p.ts = unix.NsecToTimespec(int64(d))
		r, _, e = unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(p.ep), uintptr(unsafe.Pointer(&p.events[0])),
			uintptr(len(p.events)), uintptr(unsafe.Pointer(&p.ts)), 0, 0)
		if e == unix.ENOSYS {
			p.noPwait2 = true
			p.wait(d, ports)
			return
		}
	default:
		ms := 0
		if d > 0 {
			ms = int(d / time.Millisecond)
		}
		r, _, e = unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.ep), uintptr(unsafe.Pointer(&p.events[0])),
			uintptr(len(p.events)), uintptr(ms), 0, 0)
	}
	if e != 0 {
		return // EINTR: the loop just turns
	}
	for _, ev := range p.events[:r] {
		if ev.Fd < 0 {
			unix.Read(p.ev, p.drain[:])
			continue
		}
		pl := ports[ev.Fd].pl
		if ev.Events&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			pl.readable = true
		}
	}
}

// runPolled is the real-time driver for Linux with PreciseWake: the ports
// that implement PollPort are read and written from this loop, which
// sleeps in one epoll_pwait2 covering them and the next timer (or spins
// for a wait under Config.SpinWait); other ports keep their reader and
// writer goroutines, whose batches wake the loop through an eventfd, as do
// Do and DoPrompt.
func (n *Network) runPolled(ctx context.Context, zero time.Time, catchUp bool, until time.Duration) (RealtimeStats, error) {
	pl, err := newPoller()
	if err != nil {
		return RealtimeStats{}, err
	}
	defer pl.close()
	spin := n.cfg.SpinWait
	if spin == 0 {
		spin = DefaultSpinWait
	}
	var polled []*extPort
	for _, x := range n.exts {
		pp, ok := x.port.(PollPort)
		if !ok {
			continue
		}
		fd, err := pp.PollFd()
		if err != nil {
			return RealtimeStats{}, fmt.Errorf("emu: %s: %w", x.name, err)
		}
		s := &pollState{idx: len(polled), fd: fd, ep: pl.ep, readable: true} // read at once: frames may wait
		if err := pl.ctl(unix.EPOLL_CTL_ADD, fd, unix.EPOLLIN, s.idx); err != nil {
			return RealtimeStats{}, fmt.Errorf("emu: %s: %w", x.name, os.NewSyscallError("epoll_ctl", err))
		}
		x.poll, x.pl = pp, s
		polled = append(polled, x)
	}
	defer func() {
		for _, x := range polled {
			x.poll, x.pl = nil, nil
		}
	}()

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil {
		unix.Prctl(unix.PR_SET_TIMERSLACK, pollTimerSlack, 0, 0, 0)
		defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0)
	}

	rt := &realtime{wallStart: zero, ingress: make(chan ingress, 64), calls: make(chan func()),
		prompt: make(chan func()), ended: make(chan struct{}), wakeFn: pl.wake}
	if since := int64(time.Since(zero)); catchUp && since > n.now {
		n.now = since
	}
	n.rt, n.env.real = rt, true
	n.rtp.Store(rt)
	var stopped atomic.Bool
	stopCtx := context.AfterFunc(ctx, func() { stopped.Store(true); pl.wake() })
	defer stopCtx()
	done := make(chan struct{})
	var wgR, wgW sync.WaitGroup
	for _, x := range n.exts {
		if x.pl != nil {
			bs := x.port.BatchSize()
			s := x.pl
			s.spare = make([]*Packet, bs)
			s.bufs = make([][]byte, bs)
			s.sizes = make([]int, bs)
			for i := range s.spare {
				s.spare[i] = n.cache.get()
				s.bufs[i], _ = s.spare[i].Buffer()
			}
			s.batches = make([][]*Packet, pollTurnBatches)
			for i := range s.batches {
				s.batches[i] = make([]*Packet, bs)
			}
			s.wbufs = make([][]byte, 0, bs)
			x.pending = make([]*Packet, 0, 4*bs)
			continue
		}
		x.toW = make(chan []*Packet, 256)
		x.freeW = make(chan []*Packet, 256)
		x.freeR = make(chan []*Packet, 64)
		wgR.Add(1)
		wgW.Add(1)
		go x.reader(n.pool, rt.ingress, rt.wallStart, done, pl.wake, &wgR)
		go x.writer(n.pool, &wgW)
	}
	// stamp is the arrival time given to frames read from the ports the
	// last epoll call reported: its return if it slept (they woke it), or
	// else the return of the one before (they came in since; the earliest
	// instant keeps them ahead of timers that fell due meanwhile).
	lastEnd := max(n.now, int64(time.Since(zero)))
	stamp := lastEnd
	n.start()
	n.flushExts()

	backlog := make([]ingress, 0, 64+len(polled)*pollTurnBatches)
	for {
		if stopped.Load() {
			err = ctx.Err()
			break
		}
		now := int64(time.Since(zero))
		if until > 0 && now >= int64(until) {
			now = int64(until)
		}
	collect:
		for {
			select {
			case in := <-rt.ingress:
				backlog = append(backlog, in)
			case fn := <-rt.prompt:
				fn()
			default:
				break collect
			}
		}
		for _, x := range polled {
			if x.pl.readable {
				backlog = n.pollRead(x, min(stamp, now), backlog)
			}
		}
		sortIngress(backlog)
		backlog = n.runDue(rt, backlog, now)
		n.flushExts()
		if until > 0 && now >= int64(until) {
			break
		}
		wait := n.nextWait(zero, until)
		if wait > 0 && rt.callers.Load() > 0 {
			// Do's calls run when nothing is overdue, as in the
			// goroutine driver.
			select {
			case fn := <-rt.calls:
				n.now = max(n.now, int64(time.Since(zero)))
				fn()
				continue
			case fn := <-rt.prompt:
				n.now = max(n.now, int64(time.Since(zero)))
				fn()
				continue
			default:
			}
		}
		switch {
		case wait > spin && wait > 0:
			pl.sleeping.Store(true)
			if rt.callers.Load() > 0 || len(rt.ingress) > 0 || stopped.Load() {
				wait = 0 // work arrived: only poll
			}
			pl.wait(wait, polled)
			pl.sleeping.Store(false)
			lastEnd = int64(time.Since(zero))
			stamp = lastEnd
			if pl.noPwait2 && wait > 0 && wait < time.Millisecond {
				spinUntil(zero, now+int64(wait))
			}
		default:
			if wait > 0 {
				spinUntil(zero, int64(time.Since(zero))+int64(wait))
			}
			stamp = lastEnd
			pl.wait(0, polled)
			lastEnd = int64(time.Since(zero))
		}
	}
	for _, in := range backlog {
		for _, p := range in.pkts {
			n.cache.put(p)
		}
	}
	close(done)
	for _, x := range n.exts {
		if s := x.pl; s != nil {
			for _, p := range x.pending {
				n.cache.put(p)
			}
			for _, p := range s.spare {
				n.cache.put(p)
			}
			clear(x.pending)
			x.pending = x.pending[:0]
		} else {
			close(x.toW)
		}
		if cerr := x.port.Close(); cerr != nil && err == nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("emu: closing %s: %w", x.name, cerr)
		}
	}
	return n.endRealtime(rt, &wgW, &wgR, err)
}

// spinUntil busy-waits until run time t: a sleep shorter than a few tens
// of µs wakes later than that on a VM.
func spinUntil(zero time.Time, t int64) {
	for int64(time.Since(zero)) < t {
	}
}

// sortIngress orders the turn's batches by arrival (stable: a port's
// batches keep their order). There are few: an insertion sort.
func sortIngress(b []ingress) {
	for i := 1; i < len(b); i++ {
		for j := i; j > 0 && b[j].at < b[j-1].at; j-- {
			b[j], b[j-1] = b[j-1], b[j]
		}
	}
}

// pollRead reads up to pollTurnBatches batches from a polled port (until
// it has no more queued) into backlog, stamped at.
func (n *Network) pollRead(x *extPort, at int64, backlog []ingress) []ingress {
	s := x.pl
	bs := len(s.spare)
	head := n.pool.headroom
	for b := 0; b < pollTurnBatches; b++ {
		k, err := x.poll.TryRead(s.bufs, s.sizes, head)
		if k > 0 {
			batch := s.batches[b][:k]
			for i := range k {
				p := s.spare[i]
				p.SetFrame(head, s.sizes[i])
				p.Sealed = false // from outside: every check applies
				batch[i] = p
				q := n.cache.get()
				s.spare[i] = q
				s.bufs[i], _ = q.Buffer()
			}
			backlog = append(backlog, ingress{ext: x, pkts: batch, at: at})
			x.mu.Lock()
			x.stats.ReadPackets += uint64(k)
			x.mu.Unlock()
		}
		if err != nil {
			s.readable, s.dead = false, true
			unix.EpollCtl(s.ep, unix.EPOLL_CTL_DEL, s.fd, nil)
			if !errors.Is(err, net.ErrClosed) {
				x.mu.Lock()
				x.stats.ReadErr = err.Error()
				x.mu.Unlock()
			}
			return backlog
		}
		if k < bs {
			s.readable = false
			return backlog
		}
	}
	return backlog // still readable: the rest next turn
}

// pollWrite writes a polled port's pending frames in batches until it would
// block; then it waits for writability (EPOLLOUT) with the rest queued.
func (n *Network) pollWrite(x *extPort) {
	s := x.pl
	bs := cap(s.wbufs)
	i := 0
	for i < len(x.pending) {
		k := min(len(x.pending)-i, bs)
		wb := s.wbufs[:0]
		for j := i; j < i+k; {
			f, ok := writeBuf(x.pending[j])
			if !ok { // cannot fit the headroom: dropped, as by the writer goroutine
				n.cache.put(x.pending[j])
				x.pending = append(x.pending[:j], x.pending[j+1:]...)
				k--
				continue
			}
			wb = append(wb, f)
			j++
		}
		w, err := x.poll.TryWrite(wb, writeOffset)
		x.mu.Lock()
		x.stats.WritePackets += uint64(w)
		if err != nil {
			x.stats.WriteErrors += uint64(k - w)
		}
		x.mu.Unlock()
		if err != nil {
			w = k // the rest of this batch is lost, as by the writer goroutine
		}
		for j := i; j < i+w; j++ {
			n.cache.put(x.pending[j])
			x.pending[j] = nil
		}
		i += w
		if w < k { // would block
			break
		}
	}
	x.pending = x.pending[:copy(x.pending, x.pending[i:])]
	clear(x.pending[len(x.pending):cap(x.pending)])
	if armed := len(x.pending) > 0; armed != s.outArmed {
		ev := uint32(unix.EPOLLIN)
		if armed {
			ev |= unix.EPOLLOUT
		}
		if !s.dead {
			unix.EpollCtl(s.ep, unix.EPOLL_CTL_MOD, s.fd, &unix.EpollEvent{Events: ev, Fd: int32(s.idx)})
		}
		s.outArmed = armed
	}
}
