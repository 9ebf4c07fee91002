package nodes_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// burst sends n frames of size bytes at Start, and keeps a timer of its
// own armed (key 7) to check that a CPU passes the inner node's timers on.
type burst struct {
	n, size int
}

func (b *burst) Start(env *emu.Env) {
	for i := 0; i < b.n; i++ {
		p := env.NewPacket()
		p.SetLen(b.size)
		p.Bytes()[0] = byte(i)
		env.Send(0, p)
	}
}
func (b *burst) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		env.Free(p)
	}
}
func (b *burst) Timer(*emu.Env, uint64) {}

// recorder records when each packet arrives, and fires its own timer key 7
// once at 1 µs.
type recorder struct {
	at     []time.Duration
	first  []byte
	timers int
}

func (r *recorder) Start(env *emu.Env) { env.SetTimer(time.Microsecond, 7) }
func (r *recorder) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		r.at = append(r.at, env.Now())
		r.first = append(r.first, p.Bytes()[0])
		env.Free(p)
	}
}
func (r *recorder) Timer(_ *emu.Env, key uint64) {
	if key == 7 {
		r.timers++
	}
}

// cpuNet is a sender that bursts n frames over an ideal fast link into a
// recorder behind a CPU of cfg.
func cpuNet(t *testing.T, n, size int, cfg nodes.CPUConfig) (*emu.Network, *recorder, *nodes.CPU) {
	t.Helper()
	net := emu.NewNetwork(emu.Config{Seed: 1})
	rec := &recorder{}
	cpu := nodes.NewCPU(rec, cfg)
	if err := net.AddNode("tx", 1, &burst{n: n, size: size}); err != nil {
		t.Fatal(err)
	}
	if err := net.AddNode("rx", 1, cpu); err != nil {
		t.Fatal(err)
	}
	// 1 Tb/s: a 1000-byte frame takes 8 ns, far below the CPU's time.
	if _, err := net.Connect("tx", 0, "rx", 0, emu.LinkConfig{BitsPerSecond: 1e12, Delay: time.Microsecond, QueuePackets: 10000}); err != nil {
		t.Fatal(err)
	}
	return net, rec, cpu
}

func TestCPUThroughputAndOrder(t *testing.T) {
	// 2 cores, each 1 µs + 1000 B at 8 Gb/s (1 µs) = 2 µs a packet: 100
	// packets take 100 µs of the pair, in arrival order.
	cfg := nodes.CPUConfig{Cores: 2, PerPacket: time.Microsecond, BitsPerSecond: 8e9}
	if got := cfg.Service(1000); got != 2*time.Microsecond {
		t.Fatalf("Service(1000) = %v, want 2µs", got)
	}
	net, rec, cpu := cpuNet(t, 100, 1000, cfg)
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	if len(rec.at) != 100 {
		t.Fatalf("delivered %d of 100", len(rec.at))
	}
	for i, b := range rec.first {
		if b != byte(i) {
			t.Fatalf("packet %d delivered at position %d: not FIFO", b, i)
		}
	}
	arrive := rec.at[0] - 2*time.Microsecond // the first arrival at the CPU
	if last := rec.at[99] - arrive; last < 99*time.Microsecond || last > 101*time.Microsecond {
		t.Errorf("100 packets on 2 cores of 2 µs took %v, want ≈100 µs", last)
	}
	st := cpu.Stats()
	if st.Packets != 100 || st.Dropped != 0 || st.Busy != 200*time.Microsecond || st.MaxQueue < 90 {
		t.Errorf("stats %+v", st)
	}
	if rec.timers != 1 {
		t.Errorf("inner node's own timer fired %d times, want 1", rec.timers)
	}
}

func TestCPUQueueBound(t *testing.T) {
	cfg := nodes.CPUConfig{Cores: 1, PerPacket: time.Microsecond, QueuePackets: 10}
	net, rec, cpu := cpuNet(t, 50, 100, cfg)
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	st := cpu.Stats()
	if st.Dropped == 0 || uint64(len(rec.at))+st.Dropped != 50 || st.MaxQueue > 10 {
		t.Errorf("delivered %d, stats %+v: want drops beyond a 10-packet queue, every packet accounted for", len(rec.at), st)
	}
}

func TestCPUCrashLosesQueue(t *testing.T) {
	cfg := nodes.CPUConfig{Cores: 1, PerPacket: 10 * time.Microsecond}
	net, rec, cpu := cpuNet(t, 20, 100, cfg)
	// The burst arrives at ≈1 µs; crash at 25 µs (2 delivered), resume at 30 µs.
	if err := net.Crash(25*time.Microsecond, "rx"); err != nil {
		t.Fatal(err)
	}
	if err := net.Resume(30*time.Microsecond, "rx"); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	st := cpu.Stats()
	if len(rec.at) != 2 || st.Lost != 18 {
		t.Errorf("delivered %d, lost %d: want 2 delivered before the crash and 18 lost", len(rec.at), st.Lost)
	}
}

func TestCPUZeroAllocPerPacket(t *testing.T) {
	// Paced packets (one per 3 µs through a 1 µs CPU): the extra packets of
	// the longer run cost no allocation in the CPU (nor in the network).
	mallocs := func(n int) uint64 {
		net := emu.NewNetwork(emu.Config{Seed: 1})
		if err := net.AddNode("tx", 1, &paced{n: n, every: 3 * time.Microsecond}); err != nil {
			t.Fatal(err)
		}
		if err := net.AddNode("rx", 1, nodes.NewCPU(&sink{}, nodes.CPUConfig{Cores: 2, PerPacket: time.Microsecond})); err != nil {
			t.Fatal(err)
		}
		if _, err := net.Connect("tx", 0, "rx", 0, emu.LinkConfig{BitsPerSecond: 1e12, Delay: time.Microsecond}); err != nil {
			t.Fatal(err)
		}
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		if _, err := net.Run(); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&b)
		return b.Mallocs - a.Mallocs
	}
	small, large := mallocs(200), mallocs(5200)
	if per := float64(int64(large)-int64(small)) / 5000; per > 0.01 {
		t.Errorf("%.3f allocations per packet (runs of 200 and 5200 packets: %d, %d mallocs), want 0", per, small, large)
	}
}

// paced sends n 100-byte frames, one every every.
type paced struct {
	n, sent int
	every   time.Duration
}

func (p *paced) Start(env *emu.Env) { env.SetTimer(0, 1) }
func (p *paced) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, q := range pkts {
		env.Free(q)
	}
}
func (p *paced) Timer(env *emu.Env, _ uint64) {
	q := env.NewPacket()
	q.SetLen(100)
	env.Send(0, q)
	if p.sent++; p.sent < p.n {
		env.SetTimer(env.Now()+p.every, 1)
	}
}

// sink frees what it receives.
type sink struct{}

func (sink) Start(*emu.Env) {}
func (sink) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		env.Free(p)
	}
}
func (sink) Timer(*emu.Env, uint64) {}

// A Traffic node with no peer configured counts what it receives as
// corrupt instead of crashing (it builds its expected frame from the peer).
func TestTrafficWithoutPeer(t *testing.T) {
	net := emu.NewNetwork(emu.Config{Seed: 1})
	rx := nodes.NewTraffic(nodes.TrafficConfig{})
	if err := net.AddNode("tx", 1, &burst{n: 3, size: 100}); err != nil {
		t.Fatal(err)
	}
	if err := net.AddNode("rx", 1, rx); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Connect("tx", 0, "rx", 0, emu.LinkConfig{BitsPerSecond: 1e9}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	if st := rx.Stats(); st.Corrupt != 3 || st.Unique != 0 {
		t.Errorf("stats %+v: want 3 corrupt", st)
	}
}
