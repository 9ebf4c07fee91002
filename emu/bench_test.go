package emu_test

import (
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
)

// forwarder passes packets from port 0 to port 1 and back.
type forwarder struct{}

func (forwarder) Start(*emu.Env)         {}
func (forwarder) Timer(*emu.Env, uint64) {}
func (forwarder) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		env.Send(1-p.Port, p)
	}
}

// pump keeps `window` packets in flight: it sends one for each one the sink
// returns, until total have been sent.
type pump struct {
	total, window, sent, got int
	size                     int
}

func (p *pump) Start(env *emu.Env) {
	for i := 0; i < p.window && p.sent < p.total; i++ {
		p.send(env)
	}
}
func (p *pump) send(env *emu.Env) {
	pkt := env.NewPacket()
	pkt.SetLen(p.size)
	env.Send(0, pkt)
	p.sent++
}
func (p *pump) Timer(*emu.Env, uint64) {}
func (p *pump) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, pkt := range pkts {
		env.Free(pkt)
		p.got++
		if p.sent < p.total {
			p.send(env)
		}
	}
}

// sink returns every packet on the port it came from.
type sink struct{}

func (sink) Start(*emu.Env)         {}
func (sink) Timer(*emu.Env, uint64) {}
func (sink) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		env.Send(port, p)
	}
}

// chain is pump → f1 → f2 → f3 → sink over four 100 Gbps links; the sink
// returns each packet along the same links. Each hop is one event.
func chain(tb testing.TB, total int) (*emu.Network, *pump) {
	n := emu.NewNetwork(emu.Config{Seed: 1})
	p := &pump{total: total, window: 64, size: 1000}
	must(tb, n.AddNode("src", 1, p))
	for _, f := range []string{"f1", "f2", "f3"} {
		must(tb, n.AddNode(f, 2, forwarder{}))
	}
	must(tb, n.AddNode("dst", 1, sink{}))
	cfg := emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond}
	hops := []string{"src", "f1", "f2", "f3", "dst"}
	for i := 0; i+1 < len(hops); i++ {
		_, err := n.Connect(hops[i], min(i, 1), hops[i+1], 0, cfg)
		must(tb, err)
	}
	return n, p
}

// BenchmarkVirtualTimeChain reports packet events per second through a
// 4-link chain (goal ≥ 5 M events/s per core).
func BenchmarkVirtualTimeChain(b *testing.B) {
	b.ReportAllocs()
	const perRun = 100_000
	var events uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		n, p := chain(b, perRun)
		b.StartTimer()
		if _, err := n.Run(); err != nil {
			b.Fatal(err)
		}
		if p.got != perRun {
			b.Fatalf("got %d of %d", p.got, perRun)
		}
		events += n.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

// Steady state allocates nothing per packet: running the chain further moves
// packets through links and nodes with recycled buffers and heap slots.
func TestVirtualTimeZeroAllocsPerPacket(t *testing.T) {
	n, p := chain(t, 1<<40)
	if _, err := n.RunUntil(time.Millisecond); err != nil { // warm up pools and slices
		t.Fatal(err)
	}
	step := time.Millisecond
	before := p.got
	allocs := testing.AllocsPerRun(20, func() {
		step += time.Millisecond
		if _, err := n.RunUntil(step); err != nil {
			t.Fatal(err)
		}
	})
	perRun := float64(p.got-before) / 21
	if perRun < 1000 {
		t.Fatalf("only %.0f packets per run: the chain is not moving", perRun)
	}
	// A pool or queue may still grow by a block; allow a handful per 1000s of packets.
	if allocs/perRun > 0.001 {
		t.Errorf("%.1f allocs per run of %.0f packets (%.4f per packet)", allocs, perRun, allocs/perRun)
	}
}
