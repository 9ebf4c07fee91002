//go:build linux

package emu_test

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// sockPort is a PollPort on one end of an AF_UNIX datagram socketpair: the
// polled driver's test backend (no root, no devices). Its blocking Read and
// Write fail, so a run that does not poll it shows a ReadErr.
type sockPort struct {
	name    string
	fd      int
	polled  atomic.Bool
	blocked atomic.Uint64 // TryWrite calls that would have blocked
}

var errNotPolled = errors.New("sockPort: not polled")

func (p *sockPort) Name() string                           { return p.name }
func (p *sockPort) BatchSize() int                         { return 16 }
func (p *sockPort) Read([][]byte, []int, int) (int, error) { return 0, errNotPolled }
func (p *sockPort) Write([][]byte, int) (int, error)       { return 0, errNotPolled }
func (p *sockPort) Close() error                           { return unix.Close(p.fd) }
func (p *sockPort) PollFd() (int, error)                   { p.polled.Store(true); return p.fd, nil }

func (p *sockPort) TryRead(bufs [][]byte, sizes []int, off int) (int, error) {
	for i := range bufs {
		n, err := unix.Read(p.fd, bufs[i][off:])
		if err == unix.EAGAIN {
			return i, nil
		}
		if err != nil {
			return i, err
		}
		sizes[i] = n
	}
	return len(bufs), nil
}

func (p *sockPort) TryWrite(bufs [][]byte, off int) (int, error) {
	for i, b := range bufs {
		if _, err := unix.Write(p.fd, b[off:]); err == unix.EAGAIN {
			p.blocked.Add(1)
			return i, nil
		} else if err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}

// sockPair returns a polled port and the blocking fd of its peer.
func sockPair(t testing.TB, name string) (*sockPort, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	must(t, err)
	must(t, unix.SetNonblock(fds[0], true))
	t.Cleanup(func() { unix.Close(fds[1]) })
	return &sockPort{name: name, fd: fds[0]}, fds[1]
}

// frame64 is a 64-byte Ethernet frame from MAC …:01 to …:02 with seq.
func frame64(seq uint32) []byte {
	b := make([]byte, 64)
	copy(b[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(b[6:12], []byte{2, 0, 0, 0, 0, 1})
	b[12], b[13] = 0x08, 0x00
	binary.BigEndian.PutUint32(b[20:], seq)
	return b
}

// polledSwitch runs an L2 switch between two polled socket ports in real
// time; the peers send count frames into port 0, in bursts of burst with
// gap between them, and read them from port 1. onRead, if set, runs in the
// sink after each frame (with how many it has). It returns the frames'
// sequence numbers in the order received. warm > 0 readies the packet
// pool first: warm packets with their full buffers, on its free list, and
// frames of at most 1518 bytes.
func polledSwitch(t *testing.T, count, burst int, gap time.Duration, drainAfter time.Duration,
	onRead func(got int), during func(n *emu.Network), warm int) ([]uint32, *emu.Network, *sockPort, *sockPort) {
	t.Helper()
	cfg0 := emu.Config{Seed: 1, PreciseWake: true}
	if warm > 0 {
		cfg0.MaxFrame = 1518
	}
	n := emu.NewNetwork(cfg0)
	if warm > 0 {
		pl := n.Pool()
		ps := make([]*emu.Packet, warm)
		for i := range ps {
			ps[i] = pl.Get()
			ps[i].Buffer() // the full-size buffer a polled read takes
		}
		for _, p := range ps {
			pl.Put(p)
		}
	}
	must(t, n.AddNode("s", 2, nodes.NewL2Switch()))
	p0, gen := sockPair(t, "sock0")
	p1, sink := sockPair(t, "sock1")
	cfg := emu.LinkConfig{BitsPerSecond: 10e9, Delay: 10 * time.Microsecond}
	_, err := n.Attach("s", 0, p0, cfg)
	must(t, err)
	_, err = n.Attach("s", 1, p1, cfg)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var st emu.RealtimeStats
	var runErr error
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		st, runErr = n.RunRealtime(ctx, 0)
	}()
	got := make([]uint32, 0, count)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the sink
		defer wg.Done()
		time.Sleep(drainAfter)
		buf := make([]byte, 256)
		tv := unix.NsecToTimeval(int64(2 * time.Second))
		unix.SetsockoptTimeval(sink, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		for len(got) < count {
			k, err := unix.Read(sink, buf)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if k == 64 {
				got = append(got, binary.BigEndian.Uint32(buf[20:]))
				if onRead != nil {
					onRead(len(got))
				}
			}
		}
	}()
	frames := make([][]byte, count)
	for i := range frames {
		frames[i] = frame64(uint32(i))
	}
	time.Sleep(2 * time.Millisecond) // the run has started
	for i := 0; i < count; i++ {
		if _, err := unix.Write(gen, frames[i]); err == unix.EINTR {
			i--
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if (i+1)%burst == 0 {
			if during != nil && i+1 == count/2 {
				during(n)
			}
			time.Sleep(gap)
		}
	}
	wg.Wait()
	cancel()
	<-ran
	must(t, runErr)
	if !p0.polled.Load() || !p1.polled.Load() {
		t.Fatal("the driver did not poll the ports")
	}
	for _, name := range []string{"sock0", "sock1"} {
		if s, _ := n.ExtStats(name); s.ReadErr != "" {
			t.Fatalf("%s: read error %s", name, s.ReadErr)
		}
	}
	_ = st
	return got, n, p0, p1
}

// The polled driver moves every frame through the node, in order, and
// Do and DoPrompt reach the run from another goroutine.
func TestPolledDriverForwards(t *testing.T) {
	var mid, prompt bool
	got, _, _, _ := polledSwitch(t, 3000, 50, 200*time.Microsecond, 0, nil, func(n *emu.Network) {
		n.Do(func() { mid = true })
		n.DoPrompt(func() { prompt = true })
	}, 0)
	if len(got) != 3000 {
		t.Fatalf("forwarded %d of 3000", len(got))
	}
	for i, s := range got {
		if s != uint32(i) {
			t.Fatalf("frame %d is %d: out of order", i, s)
		}
	}
	if !mid || !prompt {
		t.Fatalf("Do ran %v, DoPrompt ran %v", mid, prompt)
	}
}

// Frames for a backend that would block wait for writability in the loop
// (EPOLLOUT) and all arrive once the peer reads: an AF_UNIX datagram peer
// queues a few hundred.
func TestPolledDriverWriteBackpressure(t *testing.T) {
	got, n, _, p1 := polledSwitch(t, 3000, 3000, 0, 100*time.Millisecond, nil, nil, 0)
	if p1.blocked.Load() == 0 {
		t.Fatal("the peer never filled: the test did not exercise back-pressure")
	}
	if len(got) != 3000 {
		s0, _ := n.ExtStats("sock0")
		s1, _ := n.ExtStats("sock1")
		t.Fatalf("forwarded %d of 3000 (%+v, %+v; link %+v)", len(got), s0, s1, n.Links()[1].Stats(emu.AtoB))
	}
}

// Steady state on the polled driver allocates nothing per packet: the
// peers use raw syscalls, so every allocation counted is the run's. The
// pool is readied with a packet per frame first: on a loaded machine a
// stall lets a larger backlog build, and the pool grows to hold it (new
// packets and their buffers), which is not per-packet cost (before the
// pool was readied: up to 0.04 allocations per packet under a load of 3).
func TestPolledDriverZeroAllocsPerPacket(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const count, from, to = 30000, 10000, 28000
	var m0, m1 runtime.MemStats
	polledSwitch(t, count, 16, 50*time.Microsecond, 0, func(got int) {
		switch got {
		case from:
			runtime.ReadMemStats(&m0)
		case to:
			runtime.ReadMemStats(&m1)
		}
	}, nil, count)
	if m1.Mallocs == 0 {
		t.Fatal("did not reach the measured window")
	}
	per := float64(m1.Mallocs-m0.Mallocs) / (to - from)
	if per > 0.01 {
		t.Errorf("%d allocations for %d packets (%.3f per packet)", m1.Mallocs-m0.Mallocs, to-from, per)
	}
}

// A frame that came in while the loop was stalled reaches the node before
// a timer that fell due during the stall, and no later than it arrived
// (the polled driver reads it after the stall and stamps it with the
// stall's start, the earliest it may have come).
func TestPolledLateKeepsArrivalOrder(t *testing.T) {
	n := emu.NewNetwork(emu.Config{Seed: 1, PreciseWake: true})
	node := &stallNode{stall: 30 * time.Millisecond, timerAt: 20 * time.Millisecond}
	must(t, n.AddNode("s", 1, node))
	p, peer := sockPair(t, "sock")
	_, err := n.Attach("s", 0, p, emu.LinkConfig{})
	must(t, err)
	go func() {
		time.Sleep(5 * time.Millisecond)
		unix.Write(peer, frame64(1))
	}()
	if _, err := n.RunRealtime(context.Background(), 60*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if len(node.order) != 2 || node.order[0] != "frame" || node.order[1] != "timer" {
		t.Fatalf("order %v; want [frame timer]", node.order)
	}
	if node.frameAt > 20*time.Millisecond {
		t.Errorf("frame delivered at %v; want before the timer (20ms)", node.frameAt)
	}
}

// Frames beyond what a blocked backend and the loop's queue for it hold
// are dropped and counted (DropBackpressure), not queued without bound.
func TestPolledDriverDropsBeyondQueue(t *testing.T) {
	n := emu.NewNetwork(emu.Config{Seed: 1, PreciseWake: true})
	must(t, n.AddNode("s", 2, nodes.NewL2Switch()))
	p0, gen := sockPair(t, "sock0")
	p1, _ := sockPair(t, "sock1") // nobody reads
	cfg := emu.LinkConfig{BitsPerSecond: 100e9, QueuePackets: 1 << 20}
	_, err := n.Attach("s", 0, p0, cfg)
	must(t, err)
	_, err = n.Attach("s", 1, p1, cfg)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { _, err := n.RunRealtime(ctx, 0); ran <- err }()
	const count = 20000
	f := frame64(0)
	for i := 0; i < count; i++ {
		if _, err := unix.Write(gen, f); err == unix.EINTR {
			i--
		} else if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	var s1 emu.ExtStats
	for time.Now().Before(deadline) {
		n.Do(func() { s1, _ = n.ExtStats("sock1") })
		if s1.DropBackpressure > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	must(t, <-ran)
	s1, _ = n.ExtStats("sock1")
	if s1.DropBackpressure == 0 || p1.blocked.Load() == 0 {
		t.Fatalf("nothing dropped for a backend that never drains: %+v", s1)
	}
	if s1.WritePackets+s1.DropBackpressure > count {
		t.Fatalf("%+v: more than the %d frames sent", s1, count)
	}
}
