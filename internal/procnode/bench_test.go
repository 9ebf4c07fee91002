//go:build linux

package procnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
)

// benchFrame is a RoCEv2 RC SEND Only frame with a 256-byte payload
// (314 bytes on the wire), addressed to MAC dst: not INA, so the switch
// forwards it through l2_fwd.
func benchFrame(tb testing.TB) []byte {
	h := rdma.FrameHeader{
		Src:    rdma.Endpoint{MAC: [6]byte{2, 0xbe, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.99.0.1")},
		Dst:    rdma.Endpoint{MAC: [6]byte{2, 0xbe, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.99.0.2")},
		Opcode: rdma.OpSendOnly, DestQP: 0x11, SrcPort: 49152,
	}
	payload := make([]byte, 256)
	buf := make([]byte, h.Len(len(payload)))
	n, err := h.Encode(buf, payload)
	if err != nil {
		tb.Fatal(err)
	}
	return buf[:n]
}

func needNetAdmin(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root (network namespace, TAP)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		tb.Skip("needs /dev/net/tun")
	}
}

// benchNS creates a namespace for one benchmark and removes it afterwards.
func benchNS(tb testing.TB) string {
	tb.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "inabox-bench-" + hex.EncodeToString(b[:])
	if err := CreateNetns(name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := DeleteNetns(name); err != nil {
			tb.Error(err)
		}
	})
	return name
}

func nsHandle(tb testing.TB, ns string) *netlink.Handle {
	tb.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		tb.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nh.Close)
	return nh
}

func linkUp(tb testing.TB, h *netlink.Handle, name string) {
	tb.Helper()
	l, err := h.LinkByName(name)
	if err == nil {
		if err = h.LinkSetMulticastOff(l); err == nil {
			err = h.LinkSetUp(l)
		}
	}
	if err != nil {
		tb.Fatal(name, err)
	}
}

// pump sends b.N copies of frame with the generator and counts what the
// sink receives until it has been idle for 100 ms; it returns the
// forwarded packets per second (from the first send to the last receipt).
func pump(b *testing.B, gen, sink emu.Port, frame []byte) float64 {
	return pumpWindow(b, gen, sink, frame, 0)
}

// pumpWindow is pump with the generator at most window frames ahead of
// the sink (0: no limit): it waits for the sink when window frames are in
// flight, up to 10 ms, after which it writes those frames off as lost. A closed
// loop keeps the forwarder busy without the generator taking the CPU for
// frames that would only be dropped. It returns the forwarded packets/s.
func pumpWindow(b *testing.B, gen, sink emu.Port, frame []byte, window int) float64 {
	pps, _ := pumpWith(b, gen, sink, frame, window, 0)
	return pps
}

// pumpPaced is pump; with interval > 0 the generator sends one frame per
// interval (busy-waiting between frames) instead of as fast as it can. It
// returns the frames forwarded.
func pumpPaced(b *testing.B, gen, sink emu.Port, frame []byte, interval time.Duration) uint64 {
	_, fwd := pumpWith(b, gen, sink, frame, 0, interval)
	return fwd
}

// pumpWith is pumpWindow and pumpPaced in one: a window (0: none) and an
// interval (0: as fast as the generator can).
func pumpWith(b *testing.B, gen, sink emu.Port, frame []byte, window int, interval time.Duration) (float64, uint64) {
	more := make(chan struct{}, 1)
	var got atomic.Uint64
	var last atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		bufs := make([][]byte, sink.BatchSize())
		sizes := make([]int, len(bufs))
		for i := range bufs {
			bufs[i] = make([]byte, 2048)
		}
		for {
			n, err := sink.Read(bufs, sizes, 0)
			if n > 0 {
				got.Add(uint64(n))
				last.Store(time.Now().UnixNano())
				select {
				case more <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	batch := make([][]byte, gen.BatchSize())
	for i := range batch {
		batch[i] = frame
	}
	b.ResetTimer()
	start := time.Now()
	sent := 0
	wait := time.NewTimer(time.Hour)
	lost := 0 // frames written off as lost (not waited for again)
	next := start
	for sent < b.N {
		for window > 0 && sent-lost-int(got.Load()) > window-len(batch) {
			wait.Reset(10 * time.Millisecond)
			select {
			case <-more:
				wait.Stop()
				continue
			case <-wait.C:
			}
			lost = sent - int(got.Load()) // frames were lost: go on
			break
		}
		k := min(len(batch), b.N-sent)
		if interval > 0 {
			k = 1
			for time.Now().Before(next) {
			}
			next = next.Add(interval)
		}
		n, err := gen.Write(batch[:k], 0)
		sent += n
		if err != nil {
			b.Fatal(err)
		}
	}
	// Drain: wait until the sink has been idle for 100 ms.
	for {
		g := got.Load()
		time.Sleep(100 * time.Millisecond)
		if got.Load() == g {
			break
		}
	}
	b.StopTimer()
	sink.Close()
	wg.Wait()
	end := time.Unix(0, last.Load())
	fwd := got.Load()
	if fwd == 0 {
		b.Fatalf("nothing forwarded of %d", sent)
	}
	pps := float64(fwd) / end.Sub(start).Seconds()
	b.ReportMetric(pps, "fwd-pps")
	b.ReportMetric(float64(sent)/end.Sub(start).Seconds(), "offered-pps")
	b.ReportMetric(100*(1-float64(fwd)/float64(sent)), "loss-%")
	b.ReportMetric(0, "ns/op")
	return pps, fwd
}

// openPacket opens an AF_PACKET port in ns.
func openPacket(tb testing.TB, ns, dev string, batch int) *PacketPort {
	tb.Helper()
	var p *PacketPort
	err := InNetns(ns, func() error {
		var err error
		p, err = NewPacketPort(PacketConfig{Dev: dev, BatchSize: batch, QdiscBypass: true})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// switchProc starts the switch node in a procnode process on two ports
// (0 in, 1 out; l2_fwd to port 1) and returns a stop function.
func switchProc(tb testing.TB, ns string, att []Attachment) func() Report {
	tb.Helper()
	return switchProcDriver(tb, ns, att, false)
}

// switchProcDriver is switchProc with the goroutine driver if goroutine
// is set (Spec.GoroutinePorts), else the polled one.
func switchProcDriver(tb testing.TB, ns string, att []Attachment, goroutine bool) func() Report {
	tb.Helper()
	s, err := sw.New(sw.Config{Ports: 2})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.AddL2([6]byte{2, 0xbe, 0, 0, 0, 2}, 1); err != nil {
		tb.Fatal(err)
	}
	p, err := Open(Spec{Name: "switch", Node: sw.NewNode(s), Ports: 2, Netns: ns, Attach: att, GoroutinePorts: goroutine})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Report, 1)
	go func() {
		rep, err := p.Run(ctx)
		if err != nil {
			tb.Error(err)
		}
		done <- rep
	}()
	var once sync.Once
	var rep Report
	stop := func() Report {
		once.Do(func() { cancel(); rep = <-done })
		return rep
	}
	tb.Cleanup(func() { stop() })
	return stop
}

// BenchmarkSwitchTAP measures packets/s through the switch with
// 256-byte-payload RoCEv2 frames. A generator (AF_PACKET, sendmmsg) feeds
// the ingress device, a sink (AF_PACKET, recvmmsg) counts the egress:
//
//	base=tap-1frame-per-syscall  a bare loop: read(2) one frame from TAP t0, write(2) it to TAP t1 (no emulator)
//	runtime=tap                  the switch node under RunRealtime on TAPs t0/t1 (one read/write syscall per frame, batched hand-off)
//	runtime=packet-batch1        the switch node on AF_PACKET veth ends, one frame per recvmmsg/sendmmsg
//	runtime=packet-batch64       the same with up to 64 frames per recvmmsg/sendmmsg
//	runtime=ring-batch64         the switch node on AF_PACKET veth ends with mmapped TPACKET_V2 rings
//	                             (no syscall per received frame, one send kick per batch)
//	runtime=mem                  the switch node under RunRealtime on in-memory pipes: the runtime's own ceiling, no kernel
func BenchmarkSwitchTAP(b *testing.B) {
	needNetAdmin(b)
	frame := benchFrame(b)
	b.Run("runtime=mem", func(b *testing.B) {
		s, err := sw.New(sw.Config{Ports: 2})
		if err != nil {
			b.Fatal(err)
		}
		s.AddL2([6]byte{2, 0xbe, 0, 0, 0, 2}, 1)
		n := emu.NewNetwork(emu.Config{})
		n.AddNode("switch", 2, sw.NewNode(s))
		a0, gen := emu.NewMemPipe(64, 0)
		a1, sink := emu.NewMemPipe(64, 0)
		if _, err := n.Attach("switch", 0, a0, emu.LinkConfig{}); err != nil {
			b.Fatal(err)
		}
		if _, err := n.Attach("switch", 1, a1, emu.LinkConfig{}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan emu.RealtimeStats, 1)
		go func() { st, _ := n.RunRealtime(ctx, 0); done <- st }()
		pump(b, gen, sink, frame)
		cancel()
		st := <-done
		gen.Close()
		b.ReportMetric(float64(st.MaxLate.Microseconds()), "max-late-µs")
	})
	b.Run("base=tap-1frame-per-syscall", func(b *testing.B) { tapBase(b, frame, 0) })
	b.Run("runtime=tap", func(b *testing.B) {
		ns := benchNS(b)
		stop := switchProc(b, ns, []Attachment{
			{Port: 0, Backend: BackendTAP, Dev: "t0"}, {Port: 1, Backend: BackendTAP, Dev: "t1"}})
		h := nsHandle(b, ns)
		linkUp(b, h, "t0")
		linkUp(b, h, "t1")
		gen, sink := openPacket(b, ns, "t0", 64), openPacket(b, ns, "t1", 64)
		pump(b, gen, sink, frame)
		rep := stop()
		b.ReportMetric(float64(rep.Realtime.MaxLate.Microseconds()), "max-late-µs")
	})
	for _, c := range []struct {
		name, backend string
		batch         int
	}{{"runtime=packet-batch1", BackendPacket, 1}, {"runtime=packet-batch64", BackendPacket, 64}, {"runtime=ring-batch64", BackendRing, 64}} {
		b.Run(c.name, func(b *testing.B) {
			ns := benchNS(b)
			h := nsHandle(b, ns)
			for _, v := range [][2]string{{"g0", "s0"}, {"g1", "s1"}} {
				if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v[0]}, PeerName: v[1]}); err != nil {
					b.Fatal(err)
				}
				linkUp(b, h, v[0])
				linkUp(b, h, v[1])
			}
			stop := switchProc(b, ns, []Attachment{
				{Port: 0, Backend: c.backend, Dev: "s0", Batch: c.batch}, {Port: 1, Backend: c.backend, Dev: "s1", Batch: c.batch}})
			gen, sink := openPacket(b, ns, "g0", 64), openPacket(b, ns, "g1", 64)
			pump(b, gen, sink, frame)
			rep := stop()
			b.ReportMetric(float64(rep.Realtime.MaxLate.Microseconds()), "max-late-µs")
		})
	}
}

// tapBase is the base of the switch benchmarks: a bare loop that reads one
// frame from TAP t0 and writes it to TAP t1 (one read(2) and one write(2)
// per frame, no emulator), fed and drained by AF_PACKET sendmmsg/recvmmsg.
// It returns the forwarded packets per second.
func tapBase(b *testing.B, frame []byte, window int) float64 {
	ns := benchNS(b)
	var t0, t1 *emu.TAPPort
	err := InNetns(ns, func() (err error) {
		if t0, err = emu.NewTAPPort(emu.TAPConfig{Name: "t0", BatchSize: 1}); err != nil {
			return err
		}
		t1, err = emu.NewTAPPort(emu.TAPConfig{Name: "t1", BatchSize: 1})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	h := nsHandle(b, ns)
	linkUp(b, h, "t0")
	linkUp(b, h, "t1")
	gen, sink := openPacket(b, ns, "t0", 64), openPacket(b, ns, "t1", 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the forwarder
		defer wg.Done()
		bufs := [][]byte{make([]byte, 2048)}
		sizes := []int{0}
		for {
			n, err := t0.Read(bufs, sizes, 0)
			if err != nil {
				return
			}
			if n == 1 {
				if _, err := t1.Write([][]byte{bufs[0][:sizes[0]]}, 0); err != nil && !errors.Is(err, os.ErrClosed) {
					return
				}
			}
		}
	}()
	pps := pumpWindow(b, gen, sink, frame, window)
	t0.Close()
	t1.Close()
	wg.Wait()
	return pps
}

// openXDPBench opens an AF_XDP port in ns for a benchmark.
func openXDPBench(tb testing.TB, ns, dev, mode string) *XDPPort {
	tb.Helper()
	var p *XDPPort
	if err := InNetns(ns, func() (err error) { p, err = NewXDPPort(XDPConfig{Dev: dev, Mode: mode}); return err }); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// benchVeths makes veth pairs g0<->s0 and g1<->s1 in ns (one queue each,
// as AF_XDP serves queue 0), all up.
func benchVeths(tb testing.TB, ns string) {
	tb.Helper()
	h := nsHandle(tb, ns)
	for _, v := range [][2]string{{"g0", "s0"}, {"g1", "s1"}} {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v[0], NumTxQueues: 1, NumRxQueues: 1},
			PeerName: v[1], PeerNumTxQueues: 1, PeerNumRxQueues: 1}); err != nil {
			tb.Fatal(err)
		}
		linkUp(tb, h, v[0])
		linkUp(tb, h, v[1])
	}
}

// BenchmarkSwitchXDP measures packets/s through the switch node under
// RunRealtime (l2_fwd, 256-byte-payload RoCEv2 frames, as
// BenchmarkSwitchTAP) on AF_XDP ports, against the base measured in the
// same run:
//
//	base=tap-1frame-per-syscall  BenchmarkSwitchTAP's base: read(2)/write(2) one frame between TAPs t0/t1 (no emulator)
//	runtime=packet-batch64       the switch node on AF_PACKET veth ends (recvmmsg/sendmmsg, 64 a call), AF_PACKET generator and sink
//	pipe=xdp                     no switch: the AF_XDP generator on g0 straight into an AF_XDP sink on s0 (the kernel path's ceiling)
//	runtime=xdp-generic          as runtime=xdp with every port in generic (SKB) mode
//	runtime=xdp                  the switch node on AF_XDP veth ends s0/s1 (auto mode: native on veth, copy),
//	                             an AF_XDP generator on g0 and sink on g1; the ports polled by the run loop
//	runtime=xdp-goroutine        the same with the goroutine driver (a reader and a writer goroutine per port)
//	ratio=xdp-over-base          the medians (over -count runs) of runtime=xdp's, runtime=xdp-generic's
//	                             and runtime=packet-batch64's fwd-pps over the base's, and the medians
//
// The generator runs at most INABOX_BENCH_WINDOW frames (default 256;
// 0: no limit) ahead of the sink in every row (pumpWindow).
// Run it with a fixed count, e.g. -bench SwitchXDP -benchtime 1000000x.
func BenchmarkSwitchXDP(b *testing.B) {
	needNetAdmin(b)
	Notes = io.Discard
	defer func() { Notes = os.Stderr }()
	frame := benchFrame(b)
	// Every measurement of a row (-count n) is kept; the ratio row reports
	// medians.
	var base, pkt, gen, xdp, xdpg []float64
	keep := func(b *testing.B, v *[]float64, pps float64) {
		if b.N >= 10000 { // not testing's first probe with b.N = 1
			*v = append(*v, pps)
		}
	}
	w := benchWindow()
	b.Run("base=tap-1frame-per-syscall", func(b *testing.B) { keep(b, &base, tapBase(b, frame, w)) })
	b.Run("runtime=packet-batch64", func(b *testing.B) {
		ns := benchNS(b)
		benchVeths(b, ns)
		stop := switchProc(b, ns, []Attachment{
			{Port: 0, Backend: BackendPacket, Dev: "s0", Batch: 64}, {Port: 1, Backend: BackendPacket, Dev: "s1", Batch: 64}})
		gen, sink := openPacket(b, ns, "g0", 64), openPacket(b, ns, "g1", 64)
		keep(b, &pkt, pumpWindow(b, gen, sink, frame, w))
		rep := stop()
		b.ReportMetric(float64(rep.Realtime.MaxLate.Microseconds()), "max-late-µs")
	})
	b.Run("pipe=xdp", func(b *testing.B) {
		ns := benchNS(b)
		benchVeths(b, ns)
		pumpWindow(b, openXDPBench(b, ns, "g0", XDPModeAuto), openXDPBench(b, ns, "s0", XDPModeAuto), frame, w)
	})
	b.Run("runtime=xdp-generic", func(b *testing.B) {
		ns := benchNS(b)
		benchVeths(b, ns)
		stop := switchProc(b, ns, []Attachment{
			{Port: 0, Backend: BackendXDP, Dev: "s0", Batch: 64, XDPMode: XDPModeGeneric},
			{Port: 1, Backend: BackendXDP, Dev: "s1", Batch: 64, XDPMode: XDPModeGeneric}})
		g, sink := openXDPBench(b, ns, "g0", XDPModeGeneric), openXDPBench(b, ns, "g1", XDPModeGeneric)
		keep(b, &gen, pumpWindow(b, g, sink, frame, w))
		rep := stop()
		b.ReportMetric(float64(rep.Realtime.MaxLate.Microseconds()), "max-late-µs")
	})
	b.Run("runtime=xdp", func(b *testing.B) {
		ns := benchNS(b)
		benchVeths(b, ns)
		stop := switchProc(b, ns, []Attachment{
			{Port: 0, Backend: BackendXDP, Dev: "s0", Batch: 64}, {Port: 1, Backend: BackendXDP, Dev: "s1", Batch: 64}})
		gen, sink := openXDPBench(b, ns, "g0", XDPModeAuto), openXDPBench(b, ns, "g1", XDPModeAuto)
		keep(b, &xdp, pumpWindow(b, gen, sink, frame, w))
		rep := stop()
		b.ReportMetric(float64(rep.Realtime.MaxLate.Microseconds()), "max-late-µs")
		if b.N > 1 {
			b.Logf("generator %s, sink %s; switch ports %s, %s", gen.Describe(), sink.Describe(), rep.Ports[0].Backend, rep.Ports[1].Backend)
		}
	})
	b.Run("runtime=xdp-goroutine", func(b *testing.B) {
		ns := benchNS(b)
		benchVeths(b, ns)
		stop := switchProcDriver(b, ns, []Attachment{
			{Port: 0, Backend: BackendXDP, Dev: "s0", Batch: 64}, {Port: 1, Backend: BackendXDP, Dev: "s1", Batch: 64}}, true)
		gen, sink := openXDPBench(b, ns, "g0", XDPModeAuto), openXDPBench(b, ns, "g1", XDPModeAuto)
		keep(b, &xdpg, pumpWindow(b, gen, sink, frame, w))
		rep := stop()
		b.ReportMetric(float64(rep.Realtime.MaxLate.Microseconds()), "max-late-µs")
	})
	b.Run("ratio=xdp-over-base", func(b *testing.B) {
		if len(base) == 0 || len(xdp) == 0 {
			b.Skip("a measurement is missing")
		}
		mb, mp, mg, mx := median(base), median(pkt), median(gen), median(xdp)
		b.ReportMetric(mx/mb, "xdp/base")
		b.ReportMetric(mg/mb, "xdp-generic/base")
		b.ReportMetric(mp/mb, "packet/base")
		b.ReportMetric(mb, "base-pps")
		b.ReportMetric(mp, "packet-pps")
		b.ReportMetric(mg, "xdp-generic-pps")
		b.ReportMetric(mx, "xdp-pps")
		if len(xdpg) > 0 {
			b.ReportMetric(median(xdpg), "xdp-goroutine-pps")
			b.ReportMetric(mx/median(xdpg), "polled/goroutine")
		}
		b.ReportMetric(float64(len(xdp)), "runs")
		b.ReportMetric(0, "ns/op")
	})
}

// benchWindow is BenchmarkSwitchXDP's generator window:
// $INABOX_BENCH_WINDOW, default 256.
func benchWindow() int {
	if v, err := strconv.Atoi(os.Getenv("INABOX_BENCH_WINDOW")); err == nil && v >= 0 {
		return v
	}
	return 256
}

// median of v (0 if empty).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
