package emu_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

var (
	epA = nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1"), Port: 5000}
	epB = nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.0.0.2"), Port: 5000}
)

// pair builds sender a and receiver b joined by one link.
func pair(t testing.TB, seed uint64, cfg emu.LinkConfig, tc nodes.TrafficConfig) (*emu.Network, *emu.Link, *nodes.Traffic, *nodes.Traffic) {
	t.Helper()
	n := emu.NewNetwork(emu.Config{Seed: seed})
	tc.Local, tc.Remote = epA, epB
	a := nodes.NewTraffic(tc)
	b := nodes.NewTraffic(nodes.TrafficConfig{Local: epB, Remote: epA})
	must(t, n.AddNode("a", 1, a))
	must(t, n.AddNode("b", 1, b))
	l, err := n.Connect("a", 0, "b", 0, cfg)
	must(t, err)
	return n, l, a, b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func run(t testing.TB, n *emu.Network) time.Duration {
	t.Helper()
	end, err := n.Run()
	must(t, err)
	return end
}

// A 1 MB transfer in 1,000 packets over 10 Gbps with 5 µs propagation ends
// exactly at the analytic bound: 1000 × 800 ns of serialization (queueing
// included: all packets are offered at t=0) plus 5 µs.
func TestPhysicsExactBound(t *testing.T) {
	cases := []struct {
		name  string
		bps   int64
		delay time.Duration
		count int
		bytes int
	}{
		{"10G-1MB", 10e9, 5 * time.Microsecond, 1000, 1000},
		{"100G-jumbo", 100e9, 1 * time.Microsecond, 1000, 9000},
		// 8000 bits at 3 Gbps is 2666.67 ns: the remainder is carried, so the
		// whole transfer takes floor(8e9 bits / 3e9 b/s) ns, not 1000 × 2666.
		{"3G-fractional", 3e9, 2 * time.Microsecond, 1000, 1000},
		{"400G", 400e9, 500 * time.Nanosecond, 5000, 4200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, l, _, b := pair(t, 1, emu.LinkConfig{BitsPerSecond: c.bps, Delay: c.delay, MTUBytes: 9000, QueuePackets: c.count},
				nodes.TrafficConfig{Count: c.count, FrameBytes: c.bytes})
			run(t, n)
			st := b.Stats()
			if st.Unique != c.count {
				t.Fatalf("received %d of %d", st.Unique, c.count)
			}
			bits := big(c.count) * big(c.bytes) * 8
			want := time.Duration(bits*1e9/big(c.bps)) + c.delay
			if st.LastRx != want {
				t.Errorf("last arrival %v, analytic bound %v", st.LastRx, want)
			}
			first := time.Duration(big(c.bytes)*8*1e9/big(c.bps)) + c.delay
			if st.FirstRx != first {
				t.Errorf("first arrival %v, want %v", st.FirstRx, first)
			}
			if hw := l.Stats(emu.AtoB).QueueHighWaterPackets; hw != c.count-1 {
				t.Errorf("queue high water %d, want %d", hw, c.count-1)
			}
		})
	}
}

func big(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	}
	panic("big")
}

// threeNode is h1 — s — h2 with every impairment on, pcaps on every port, and
// a few faults.
func threeNode(t testing.TB, seed uint64) (pcaps map[string]*bytes.Buffer, counters string) {
	t.Helper()
	n := emu.NewNetwork(emu.Config{Seed: seed})
	h1 := nodes.NewTraffic(nodes.TrafficConfig{Local: epA, Remote: epB, Count: 3000, FrameBytes: 700, Interval: 300 * time.Nanosecond, ECN: true})
	h2 := nodes.NewTraffic(nodes.TrafficConfig{Local: epB, Remote: epA, Count: 3000, FrameBytes: 1200, Interval: 500 * time.Nanosecond, ECN: true})
	sw := nodes.NewL2Switch()
	must(t, n.AddNode("h1", 1, h1))
	must(t, n.AddNode("h2", 1, h2))
	must(t, n.AddNode("s", 2, sw))
	cfg := emu.LinkConfig{
		BitsPerSecond: 25e9, Delay: 2 * time.Microsecond, Jitter: 300 * time.Nanosecond,
		QueuePackets: 64, ECNThresholdBytes: 4000, MTUBytes: 1500,
		Impairments: emu.Impairments{
			Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, ReorderDelay: 3 * time.Microsecond, Corrupt: 0.01,
			GilbertElliott: &emu.GilbertElliott{PGoodToBad: 0.002, PBadToGood: 0.3, LossBad: 0.8},
		},
	}
	l1, err := n.Connect("h1", 0, "s", 0, cfg)
	must(t, err)
	slow := cfg
	slow.BitsPerSecond = 10e9
	l2, err := n.Connect("s", 1, "h2", 0, slow)
	must(t, err)
	must(t, n.LossBurst(200*time.Microsecond, 20*time.Microsecond, l1, 0.5))
	must(t, n.DelaySpike(400*time.Microsecond, 50*time.Microsecond, l2, 7*time.Microsecond))
	must(t, n.CorruptWindow(600*time.Microsecond, 30*time.Microsecond, l2, 0.3))
	n.LinkDown(800*time.Microsecond, l1)
	n.LinkUp(820*time.Microsecond, l1)
	must(t, n.Crash(1000*time.Microsecond, "s"))
	must(t, n.Restart(1010*time.Microsecond, "s"))
	pcaps = map[string]*bytes.Buffer{}
	for _, p := range []struct {
		node string
		port int
	}{{"h1", 0}, {"h2", 0}, {"s", 0}, {"s", 1}} {
		buf := &bytes.Buffer{}
		must(t, n.Capture(p.node, p.port, buf))
		pcaps[p.node+":"+string(rune('0'+p.port))] = buf
	}
	end := run(t, n)
	var sb strings.Builder
	for _, l := range n.Links() {
		for _, d := range []emu.Dir{emu.AtoB, emu.BtoA} {
			sb.WriteString(l.Name() + d.String() + ": ")
			sb.WriteString(strings.ReplaceAll(fmtStruct(l.Stats(d)), "\n", " "))
			sb.WriteString("\n")
		}
	}
	for _, p := range []struct {
		node string
		port int
	}{{"h1", 0}, {"h2", 0}, {"s", 0}, {"s", 1}} {
		ps, err := n.PortStats(p.node, p.port)
		must(t, err)
		sb.WriteString(fmt.Sprintf("%s:%d: %+v\n", p.node, p.port, ps))
	}
	sb.WriteString("h1 rx: " + fmtStruct(h1.Stats()) + "\nh2 rx: " + fmtStruct(h2.Stats()) + "\n")
	sb.WriteString("end: " + end.String() + "\n")
	return pcaps, sb.String()
}

func fmtStruct(v any) string { return fmt.Sprintf("%+v", v) }

// Same scenario and seed ⇒ byte-identical pcaps and identical counters;
// another seed ⇒ different ones.
func TestDeterminism(t *testing.T) {
	p1, c1 := threeNode(t, 7)
	p2, c2 := threeNode(t, 7)
	p3, c3 := threeNode(t, 8)
	if c1 != c2 {
		t.Fatalf("counters differ between runs with the same seed:\n%s\n---\n%s", c1, c2)
	}
	for k := range p1 {
		if p1[k].Len() < 10000 {
			t.Fatalf("pcap %s suspiciously small: %d bytes", k, p1[k].Len())
		}
		if !bytes.Equal(p1[k].Bytes(), p2[k].Bytes()) {
			t.Errorf("pcap %s differs between runs with the same seed", k)
		}
	}
	if c1 == c3 {
		t.Errorf("counters identical for seeds 7 and 8:\n%s", c1)
	}
	same := 0
	for k := range p1 {
		if bytes.Equal(p1[k].Bytes(), p3[k].Bytes()) {
			same++
		}
	}
	if same == len(p1) {
		t.Errorf("all pcaps identical for seeds 7 and 8")
	}
	// Every impairment and fault actually happened in the scenario.
	for _, want := range []string{"Duplicated:0 ", "Reordered:0 ", "Corrupted:0 ", "ECNMarked:0 ", "Loss:0}", "LinkDown:0 ", "DropNodeDown:0}"} {
		if strings.Count(c1, want) == strings.Count(c1, strings.SplitN(want, ":", 2)[0]+":") {
			t.Errorf("no %s anywhere: the scenario does not exercise it", strings.SplitN(want, ":", 2)[0])
		}
	}
	t.Logf("counters (seed 7):\n%s", c1)
}

// within reports whether x successes out of n trials are within z standard
// deviations of the binomial mean for probability p.
func within(x, n int, p, z float64) (bool, float64, float64) {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(x)-mean) <= z*sd, mean, sd
}

// The z of the acceptance bounds: with ~15 checks per run, a correct
// implementation fails one by chance with probability well under 1e-4.
const zBound = 4.5

func TestImpairmentRates(t *testing.T) {
	const N = 100_000
	cases := []struct {
		name  string
		imp   emu.Impairments
		check func(t *testing.T, l emu.LinkStats, r nodes.TrafficStats)
	}{
		{"loss", emu.Impairments{Loss: 0.05}, func(t *testing.T, l emu.LinkStats, r nodes.TrafficStats) {
			lost := N - r.Unique
			if ok, m, sd := within(lost, N, 0.05, zBound); !ok {
				t.Errorf("lost %d of %d; binomial mean %.0f sd %.1f", lost, N, m, sd)
			}
			if uint64(lost) != l.Drops.Loss {
				t.Errorf("receiver missed %d, link counted %d", lost, l.Drops.Loss)
			}
		}},
		{"duplicate", emu.Impairments{Duplicate: 0.02}, func(t *testing.T, l emu.LinkStats, r nodes.TrafficStats) {
			if ok, m, sd := within(r.Duplicates, N, 0.02, zBound); !ok {
				t.Errorf("%d duplicates of %d; binomial mean %.0f sd %.1f", r.Duplicates, N, m, sd)
			}
			if r.Unique != N {
				t.Errorf("unique %d, want %d", r.Unique, N)
			}
		}},
		{"reorder", emu.Impairments{Reorder: 0.03, ReorderDelay: 5 * time.Microsecond}, func(t *testing.T, l emu.LinkStats, r nodes.TrafficStats) {
			if ok, m, sd := within(r.Reordered, N, 0.03, zBound); !ok {
				t.Errorf("%d reordered of %d; binomial mean %.0f sd %.1f", r.Reordered, N, m, sd)
			}
			if r.Unique != N || r.Duplicates != 0 {
				t.Errorf("unique %d dup %d, want %d 0", r.Unique, r.Duplicates, N)
			}
		}},
		// Corruption on the wire: the receiving MAC drops the frame (bad
		// FCS); the receiver never sees it.
		{"corrupt", emu.Impairments{Corrupt: 0.01}, func(t *testing.T, l emu.LinkStats, r nodes.TrafficStats) {
			if ok, m, sd := within(int(l.Drops.FCS), N, 0.01, zBound); !ok {
				t.Errorf("%d FCS drops of %d; binomial mean %.0f sd %.1f", l.Drops.FCS, N, m, sd)
			}
			if r.Corrupt != 0 || uint64(r.Unique)+l.Drops.FCS != N || l.Corrupted != l.Drops.FCS {
				t.Errorf("corrupt seen %d, good %d + FCS drops %d != %d (corrupted %d)", r.Corrupt, r.Unique, l.Drops.FCS, N, l.Corrupted)
			}
		}},
		// Corruption past the FCS: delivered damaged; the receiver's own
		// check (the traffic node's checksum) catches it.
		{"corrupt-undetected", emu.Impairments{CorruptUndetected: 0.01}, func(t *testing.T, l emu.LinkStats, r nodes.TrafficStats) {
			if ok, m, sd := within(r.Corrupt, N, 0.01, zBound); !ok {
				t.Errorf("%d corrupt of %d; binomial mean %.0f sd %.1f", r.Corrupt, N, m, sd)
			}
			if r.Corrupt+r.Unique != N || l.Drops.FCS != 0 {
				t.Errorf("corrupt %d + good %d != %d (FCS drops %d)", r.Corrupt, r.Unique, N, l.Drops.FCS)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, l, _, b := pair(t, 42, emu.LinkConfig{Delay: 10 * time.Microsecond, Impairments: c.imp},
				nodes.TrafficConfig{Count: N, FrameBytes: 100, Interval: time.Microsecond})
			run(t, n)
			c.check(t, l.Stats(emu.AtoB), b.Stats())
		})
	}
}

// Gilbert–Elliott: with LossGood 0 and LossBad 1 the loss bursts seen by the
// receiver are geometric with mean 1/PBadToGood, and the long-run loss rate is
// PGoodToBad / (PGoodToBad + PBadToGood).
func TestGilbertElliottBursts(t *testing.T) {
	const N = 200_000
	ge := &emu.GilbertElliott{PGoodToBad: 0.01, PBadToGood: 0.25, LossBad: 1}
	n := emu.NewNetwork(emu.Config{Seed: 3})
	a := nodes.NewTraffic(nodes.TrafficConfig{Local: epA, Remote: epB, Count: N, FrameBytes: 64, Interval: time.Microsecond})
	rec := &seqRecorder{}
	must(t, n.AddNode("a", 1, a))
	must(t, n.AddNode("b", 1, rec))
	_, err := n.Connect("a", 0, "b", 0, emu.LinkConfig{Impairments: emu.Impairments{GilbertElliott: ge}})
	must(t, err)
	run(t, n)
	var bursts, lostTotal int
	prev := int64(-1)
	for _, s := range append(rec.seqs, N) {
		if gap := int64(s) - prev - 1; gap > 0 {
			bursts++
			lostTotal += int(gap)
		}
		prev = int64(s)
	}
	mean := float64(lostTotal) / float64(bursts)
	r := ge.PBadToGood
	wantMean := 1 / r
	sdMean := math.Sqrt((1-r)/(r*r)) / math.Sqrt(float64(bursts))
	if math.Abs(mean-wantMean) > zBound*sdMean {
		t.Errorf("mean burst %.3f over %d bursts, want %.3f ± %.3f", mean, bursts, wantMean, zBound*sdMean)
	}
	pi := ge.PGoodToBad / (ge.PGoodToBad + ge.PBadToGood)
	// Loss is correlated, so allow the bound of the number of bursts instead
	// of a binomial one: bursts ~ Binomial(N·πgood, PGoodToBad).
	if ok, m, sd := within(bursts, int(float64(N)*(1-pi)), ge.PGoodToBad, zBound); !ok {
		t.Errorf("%d bursts, binomial mean %.0f sd %.1f", bursts, m, sd)
	}
	t.Logf("bursts %d, mean length %.3f (want %.3f), loss rate %.4f (stationary %.4f)", bursts, mean, wantMean, float64(lostTotal)/N, pi)
}

type seqRecorder struct{ seqs []uint64 }

func (r *seqRecorder) Start(*emu.Env)         {}
func (r *seqRecorder) Timer(*emu.Env, uint64) {}
func (r *seqRecorder) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		b := p.Bytes()
		r.seqs = append(r.seqs, beUint64(b[42:50]))
		env.Free(p)
	}
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}

func TestQueueDropTailAndHighWater(t *testing.T) {
	n, l, _, b := pair(t, 1, emu.LinkConfig{BitsPerSecond: 1e9, QueuePackets: 10},
		nodes.TrafficConfig{Count: 100, FrameBytes: 500})
	run(t, n)
	st := l.Stats(emu.AtoB)
	// One packet is on the wire, ten wait: the other 89 are dropped.
	if st.Drops.Queue != 89 || b.Stats().Unique != 11 || st.QueueHighWaterPackets != 10 || st.QueueHighWaterBytes != 5000 {
		t.Errorf("drops %d delivered %d high water %d pkts %d bytes", st.Drops.Queue, b.Stats().Unique, st.QueueHighWaterPackets, st.QueueHighWaterBytes)
	}
	// A byte bound works the same way.
	n, l, _, b = pair(t, 1, emu.LinkConfig{BitsPerSecond: 1e9, QueueBytes: 1600},
		nodes.TrafficConfig{Count: 10, FrameBytes: 500})
	run(t, n)
	if st := l.Stats(emu.AtoB); st.Drops.Queue != 6 || b.Stats().Unique != 4 {
		t.Errorf("byte-bounded queue: drops %d delivered %d, want 6 and 4", st.Drops.Queue, b.Stats().Unique)
	}
}

func TestECNMarking(t *testing.T) {
	n, l, _, b := pair(t, 1, emu.LinkConfig{BitsPerSecond: 1e9, ECNThresholdBytes: 3000},
		nodes.TrafficConfig{Count: 20, FrameBytes: 1000, ECN: true})
	run(t, n)
	st, r := l.Stats(emu.AtoB), b.Stats()
	// Packet k (k ≥ 1) finds k-1 packets (1000 B each) queued behind the one
	// on the wire: marked when (k-1)·1000 > 3000, i.e. k = 5..19.
	if st.ECNMarked != 15 || r.CEMarked != 15 || r.Corrupt != 0 || r.Unique != 20 {
		t.Errorf("marked %d, receiver saw %d CE (corrupt %d, unique %d); want 15, 15, 0, 20", st.ECNMarked, r.CEMarked, r.Corrupt, r.Unique)
	}
	// Not ECN-capable: never marked.
	n, l, _, b = pair(t, 1, emu.LinkConfig{BitsPerSecond: 1e9, ECNThresholdBytes: 3000},
		nodes.TrafficConfig{Count: 20, FrameBytes: 1000})
	run(t, n)
	if l.Stats(emu.AtoB).ECNMarked != 0 || b.Stats().CEMarked != 0 {
		t.Errorf("a not-ECT packet was marked")
	}
}

func TestMTUDrops(t *testing.T) {
	n, l, _, b := pair(t, 1, emu.LinkConfig{MTUBytes: 1500}, nodes.TrafficConfig{Count: 5, FrameBytes: 1515})
	run(t, n)
	if st := l.Stats(emu.AtoB); st.Drops.MTU != 5 || b.Stats().Received != 0 {
		t.Errorf("MTU drops %d, received %d", st.Drops.MTU, b.Stats().Received)
	}
	n, l, _, b = pair(t, 1, emu.LinkConfig{MTUBytes: 1500}, nodes.TrafficConfig{Count: 5, FrameBytes: 1514})
	run(t, n)
	if st := l.Stats(emu.AtoB); st.Drops.MTU != 0 || b.Stats().Unique != 5 {
		t.Errorf("1514-byte frames at MTU 1500: drops %d, received %d", st.Drops.MTU, b.Stats().Unique)
	}
}

func TestLinkDownUpDropsInFlight(t *testing.T) {
	// One packet every 1 µs for 100 µs over a 10 µs link; down from 30 to 50 µs.
	n, l, _, b := pair(t, 1, emu.LinkConfig{Delay: 10 * time.Microsecond},
		nodes.TrafficConfig{Count: 100, FrameBytes: 100, Interval: time.Microsecond})
	n.LinkDown(30*time.Microsecond+500, l)
	n.LinkUp(50*time.Microsecond+500, l)
	run(t, n)
	st := l.Stats(emu.AtoB)
	// In flight at 30.5 µs: sent at 21..30 (10 packets); offered while down:
	// sent at 31..50 (20 packets).
	if st.Drops.LinkDown != 30 || b.Stats().Unique != 70 {
		t.Errorf("link-down drops %d, delivered %d; want 30 and 70", st.Drops.LinkDown, b.Stats().Unique)
	}
	if !l.Up() {
		t.Error("link still down")
	}
}

func TestImpairmentChangeKeepsInFlight(t *testing.T) {
	n, l, _, b := pair(t, 1, emu.LinkConfig{Delay: 50 * time.Microsecond},
		nodes.TrafficConfig{Count: 100, FrameBytes: 100, Interval: time.Microsecond})
	n.At(20*time.Microsecond+500, func() {
		must(t, l.SetImpairments(emu.AtoB, emu.Impairments{Loss: 1}))
	})
	run(t, n)
	// Sent at 0..20 µs: in flight when loss became 1, all delivered; the rest lost.
	if got := b.Stats().Unique; got != 21 || l.Stats(emu.AtoB).Drops.Loss != 79 {
		t.Errorf("delivered %d, lost %d; want 21, 79", got, l.Stats(emu.AtoB).Drops.Loss)
	}
	if err := l.SetImpairments(emu.AtoB, emu.Impairments{Loss: 2}); err == nil || !strings.Contains(err.Error(), "Impairments.Loss = 2") {
		t.Errorf("bad impairment accepted or unclear error: %v", err)
	}
}

// crashSetup is h1 — s — h2: h1 sends 100 frames 1 µs apart to h2, which
// sends one back (so the learning switch s learns where h2 is).
func crashSetup(t *testing.T) (*emu.Network, *nodes.Traffic, *nodes.L2Switch) {
	t.Helper()
	n := emu.NewNetwork(emu.Config{Seed: 1})
	h1 := nodes.NewTraffic(nodes.TrafficConfig{Local: epA, Remote: epB, Count: 100, FrameBytes: 100, Interval: time.Microsecond})
	h2 := nodes.NewTraffic(nodes.TrafficConfig{Local: epB, Remote: epA, Count: 1, FrameBytes: 100})
	sw := nodes.NewL2Switch()
	must(t, n.AddNode("h1", 1, h1))
	must(t, n.AddNode("h2", 1, h2))
	must(t, n.AddNode("s", 2, sw))
	_, err := n.Connect("h1", 0, "s", 0, emu.LinkConfig{})
	must(t, err)
	_, err = n.Connect("s", 1, "h2", 0, emu.LinkConfig{})
	must(t, err)
	return n, h2, sw
}

func TestCrashRestartLosesState(t *testing.T) {
	n, h2, sw := crashSetup(t)
	must(t, n.Crash(40*time.Microsecond+500, "s"))
	must(t, n.Restart(60*time.Microsecond+500, "s"))
	var downMid bool
	n.At(50*time.Microsecond, func() { downMid = !n.NodeUp("s") })
	run(t, n)
	ps, _ := n.PortStats("s", 0)
	if ps.DropNodeDown != 20 || h2.Stats().Unique != 80 || !downMid {
		t.Errorf("drops while down %d (want 20), delivered %d (want 80), down mid-window %v", ps.DropNodeDown, h2.Stats().Unique, downMid)
	}
	// h1's first frame is flooded (h2 not yet known), h2's frame teaches the
	// switch, frames 1..40 are forwarded; after the restart the table is empty
	// again and h2 never speaks, so frames 61..99 are flooded.
	if sw.Flooded != 1+39 || sw.Forwarded != 40+1 {
		t.Errorf("flooded %d, forwarded %d; want 40 and 41 (table lost in the crash)", sw.Flooded, sw.Forwarded)
	}
}

func TestCrashResumeKeepsState(t *testing.T) {
	n, h2, sw := crashSetup(t)
	must(t, n.Crash(40*time.Microsecond+500, "s"))
	must(t, n.Resume(60*time.Microsecond+500, "s"))
	if err := n.Resume(time.Microsecond, "nosuch"); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("Resume of an unknown node: %v", err)
	}
	run(t, n)
	ps, _ := n.PortStats("s", 0)
	// As TestCrashRestartLosesState, but the table survives the pause:
	// frames 61..99 are forwarded, not flooded.
	if ps.DropNodeDown != 20 || h2.Stats().Unique != 80 || sw.Flooded != 1 || sw.Forwarded != 40+1+39 {
		t.Errorf("drops while down %d (want 20), delivered %d (want 80), flooded %d (want 1), forwarded %d (want 80): table lost in a pause",
			ps.DropNodeDown, h2.Stats().Unique, sw.Flooded, sw.Forwarded)
	}
}

// recorder keeps a copy of every frame it receives.
type recorder struct{ got [][]byte }

func (r *recorder) Start(*emu.Env)         {}
func (r *recorder) Timer(*emu.Env, uint64) {}
func (r *recorder) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		r.got = append(r.got, append([]byte(nil), p.Bytes()...))
		env.Free(p)
	}
}

func TestInject(t *testing.T) {
	n := emu.NewNetwork(emu.Config{Seed: 1})
	idle := nodes.NewTraffic(nodes.TrafficConfig{Local: epA, Remote: epB})
	rec := &recorder{}
	must(t, n.AddNode("a", 1, idle))
	must(t, n.AddNode("b", 1, rec))
	l, err := n.Connect("a", 0, "b", 0, emu.LinkConfig{Delay: time.Microsecond})
	must(t, err)
	frame := make([]byte, 100)
	for i := range 5 {
		frame[0] = byte(i)
		must(t, n.Inject(time.Duration(i)*time.Microsecond, "a", 0, frame))
	}
	frame[1] = 0xff // Inject copied it: later changes do not reach the wire
	if err := n.Inject(0, "a", 1, frame); err == nil || !strings.Contains(err.Error(), "no port 1") {
		t.Errorf("Inject on a missing port: %v", err)
	}
	if err := n.Inject(0, "nosuch", 0, frame); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("Inject from an unknown node: %v", err)
	}
	run(t, n)
	ps, _ := n.PortStats("a", 0)
	if st := l.Stats(emu.AtoB); st.DeliveredPackets != 5 || ps.TxPackets != 5 || len(rec.got) != 5 {
		t.Fatalf("link delivered %d, port sent %d, node received %d; want 5 each", st.DeliveredPackets, ps.TxPackets, len(rec.got))
	}
	for i, f := range rec.got {
		if len(f) != 100 || f[0] != byte(i) || f[1] != 0 {
			t.Errorf("frame %d arrived as % x...; want %02x 00 ...", i, f[:2], i)
		}
	}
}

type timerNode struct {
	fired []string
}

func (tn *timerNode) Start(env *emu.Env) {
	env.SetTimer(10, 1)
	env.SetTimer(20, 2)
	env.SetTimer(30, 1) // replaces the first expiry of key 1
	env.SetTimer(5, 3)
	env.StopTimer(3)
	env.SetTimer(40, 4)
	env.SetTimer(40, 5) // equal times fire in arming order
}
func (tn *timerNode) Receive(*emu.Env, int, []*emu.Packet) {}
func (tn *timerNode) Timer(env *emu.Env, key uint64) {
	tn.fired = append(tn.fired, env.Now().String()+"/"+string(rune('0'+key)))
}

func TestTimers(t *testing.T) {
	n := emu.NewNetwork(emu.Config{})
	tn := &timerNode{}
	must(t, n.AddNode("t", 1, tn))
	run(t, n)
	want := []string{"20ns/2", "30ns/1", "40ns/4", "40ns/5"}
	if !reflect.DeepEqual(tn.fired, want) {
		t.Errorf("fired %v, want %v", tn.fired, want)
	}
}

func TestBadConfigNamesFieldAndValue(t *testing.T) {
	cases := []struct {
		cfg  emu.LinkConfig
		want string
	}{
		{emu.LinkConfig{BitsPerSecond: -5}, "BitsPerSecond = -5"},
		{emu.LinkConfig{Delay: -time.Second}, "Delay = -1s"},
		{emu.LinkConfig{Jitter: -1}, "Jitter = -1ns"},
		{emu.LinkConfig{MTUBytes: 20}, "MTUBytes = 20"},
		{emu.LinkConfig{QueuePackets: -1}, "QueuePackets = -1"},
		{emu.LinkConfig{QueueBytes: -1}, "QueueBytes = -1"},
		{emu.LinkConfig{ECNThresholdBytes: -1}, "ECNThresholdBytes = -1"},
		{emu.LinkConfig{OverheadBytes: -24}, "OverheadBytes = -24"},
		{emu.LinkConfig{Impairments: emu.Impairments{Loss: 1.5}}, "Impairments.Loss = 1.5"},
		{emu.LinkConfig{Impairments: emu.Impairments{Loss: math.NaN()}}, "Impairments.Loss = NaN"},
		{emu.LinkConfig{Impairments: emu.Impairments{Duplicate: -0.1}}, "Impairments.Duplicate = -0.1"},
		{emu.LinkConfig{Impairments: emu.Impairments{Reorder: 2}}, "Impairments.Reorder = 2"},
		{emu.LinkConfig{Impairments: emu.Impairments{Corrupt: 7}}, "Impairments.Corrupt = 7"},
		{emu.LinkConfig{Impairments: emu.Impairments{ReorderDelay: -1}}, "Impairments.ReorderDelay = -1ns"},
		{emu.LinkConfig{Impairments: emu.Impairments{GilbertElliott: &emu.GilbertElliott{PBadToGood: 3}}}, "Impairments.GilbertElliott.PBadToGood = 3"},
	}
	for _, c := range cases {
		n := emu.NewNetwork(emu.Config{})
		must(t, n.AddNode("a", 1, &timerNode{}))
		must(t, n.AddNode("b", 1, &timerNode{}))
		_, err := n.Connect("a", 0, "b", 0, c.cfg)
		var ce *emu.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "a:0→b:0") {
			t.Errorf("config %+v: error %v, want one naming %q and the link", c.cfg, err, c.want)
		}
	}
	n := emu.NewNetwork(emu.Config{})
	if err := n.AddNode("a", 0, &timerNode{}); err == nil || !strings.Contains(err.Error(), "Ports = 0") {
		t.Errorf("AddNode with 0 ports: %v", err)
	}
	must(t, n.AddNode("a", 1, &timerNode{}))
	if err := n.AddNode("a", 1, &timerNode{}); err == nil {
		t.Error("duplicate node name accepted")
	}
	if _, err := n.Connect("a", 0, "zz", 0, emu.LinkConfig{}); err == nil || !strings.Contains(err.Error(), `"zz"`) {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := n.Connect("a", 3, "a", 0, emu.LinkConfig{}); err == nil || !strings.Contains(err.Error(), "port = 3") {
		t.Errorf("bad port: %v", err)
	}
	if err := n.LossBurst(0, 1, &emu.Link{}, 1.2); err == nil || !strings.Contains(err.Error(), "Overlay.Loss = 1.2") {
		t.Errorf("bad loss burst: %v", err)
	}
}

func TestRunUntilDeadline(t *testing.T) {
	n, _, _, b := pair(t, 1, emu.LinkConfig{Delay: time.Microsecond},
		nodes.TrafficConfig{Count: 100, FrameBytes: 100, Interval: time.Microsecond})
	end, err := n.RunUntil(50 * time.Microsecond)
	must(t, err)
	if end != 50*time.Microsecond || b.Stats().Unique != 50 {
		t.Errorf("at %v: %d delivered, want 50µs and 50", end, b.Stats().Unique)
	}
	end, err = n.RunUntil(time.Second)
	must(t, err)
	if b.Stats().Unique != 100 || end != 100*time.Microsecond {
		t.Errorf("after continuing: %d delivered at %v", b.Stats().Unique, end)
	}
}

// TestDuplicateReorderBursts: a duplication or reordering window acts on
// the frames sent in it and on no other.
func TestDuplicateReorderBursts(t *testing.T) {
	for _, kind := range []string{"duplicate", "reorder"} {
		n, l, _, b := pair(t, 1, emu.LinkConfig{}, nodes.TrafficConfig{Count: 1000, FrameBytes: 100, Interval: time.Microsecond})
		// frames 300..399 are sent in the window
		burst := n.DuplicateBurst
		if kind == "reorder" {
			burst = n.ReorderBurst
		}
		must(t, burst(300*time.Microsecond-500, 100*time.Microsecond, l, 1))
		run(t, n)
		st, rx := l.Stats(emu.AtoB), b.Stats()
		switch kind {
		case "duplicate":
			if rx.Duplicates != 100 || rx.Unique != 1000 {
				t.Errorf("duplicate burst: %d duplicates, %d unique; want 100 and 1000", rx.Duplicates, rx.Unique)
			}
		case "reorder":
			if st.Reordered != 100 || rx.Unique != 1000 {
				t.Errorf("reorder burst: %d reordered, %d unique; want 100 and 1000", st.Reordered, rx.Unique)
			}
		}
	}
	if err := emu.NewNetwork(emu.Config{}).DuplicateBurst(0, 1, &emu.Link{}, 2); err == nil || !strings.Contains(err.Error(), "Overlay.Duplicate = 2") {
		t.Errorf("bad probability: %v", err)
	}
}

// ticker re-arms its timer every µs forever and calls onTick on each.
type ticker struct {
	ticks  int
	onTick func(int)
}

func (tk *ticker) Start(env *emu.Env)                   { env.SetTimer(time.Microsecond, 1) }
func (tk *ticker) Receive(*emu.Env, int, []*emu.Packet) {}
func (tk *ticker) Timer(env *emu.Env, _ uint64) {
	tk.ticks++
	if tk.onTick != nil {
		tk.onTick(tk.ticks)
	}
	env.SetTimer(env.Now()+time.Microsecond, 1)
}

// TestInterrupt: Interrupt stops RunUntil after the event it is
// processing, at that event's time, and later calls return at once; from
// another goroutine it stops a run that would never end.
func TestInterrupt(t *testing.T) {
	n := emu.NewNetwork(emu.Config{})
	tk := &ticker{}
	tk.onTick = func(k int) {
		if k == 5 {
			n.Interrupt()
		}
	}
	must(t, n.AddNode("t", 1, tk))
	now, err := n.RunUntil(time.Second)
	if !errors.Is(err, emu.ErrInterrupted) || now != 5*time.Microsecond || tk.ticks != 5 {
		t.Fatalf("RunUntil: %v at %v after %d ticks; want ErrInterrupted at 5µs after 5", err, now, tk.ticks)
	}
	if now, err := n.RunUntil(time.Second); !errors.Is(err, emu.ErrInterrupted) || tk.ticks != 5 || now != 5*time.Microsecond {
		t.Fatalf("RunUntil again: %v at %v after %d ticks; want ErrInterrupted at once", err, now, tk.ticks)
	}

	n2 := emu.NewNetwork(emu.Config{})
	must(t, n2.AddNode("t", 1, &ticker{}))
	done := make(chan error, 1)
	go func() {
		_, err := n2.Run()
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	n2.Interrupt()
	select {
	case err := <-done:
		if !errors.Is(err, emu.ErrInterrupted) {
			t.Fatalf("Run: %v, want ErrInterrupted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10 s after Interrupt")
	}
}
