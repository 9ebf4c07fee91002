package emu_test

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// The same nodes and links run unchanged under the real-time driver. Inside
// a synctest bubble the wall clock is fake and exact, so a real-time run of a
// scenario must give exactly the counters and pcap bytes of its virtual-time
// run — which checks that both drivers share one model.
func TestRealtimeMatchesVirtual(t *testing.T) {
	build := func() (*emu.Network, *nodes.Traffic, *nodes.Traffic, *bytes.Buffer) {
		n := emu.NewNetwork(emu.Config{Seed: 11})
		h1 := nodes.NewTraffic(nodes.TrafficConfig{Local: epA, Remote: epB, Count: 300, FrameBytes: 800, Interval: 2 * time.Microsecond})
		h2 := nodes.NewTraffic(nodes.TrafficConfig{Local: epB, Remote: epA, Count: 300, FrameBytes: 400, Interval: 3 * time.Microsecond})
		must(t, n.AddNode("h1", 1, h1))
		must(t, n.AddNode("h2", 1, h2))
		must(t, n.AddNode("s", 2, nodes.NewL2Switch()))
		cfg := emu.LinkConfig{BitsPerSecond: 1e9, Delay: 20 * time.Microsecond, Jitter: time.Microsecond,
			Impairments: emu.Impairments{Loss: 0.05, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.02}}
		l, err := n.Connect("h1", 0, "s", 0, cfg)
		must(t, err)
		_, err = n.Connect("s", 1, "h2", 0, cfg)
		must(t, err)
		must(t, n.LossBurst(200*time.Microsecond, 100*time.Microsecond, l, 0.5))
		must(t, n.Crash(500*time.Microsecond, "s"))
		must(t, n.Restart(520*time.Microsecond, "s"))
		buf := &bytes.Buffer{}
		must(t, n.Capture("s", 1, buf))
		return n, h1, h2, buf
	}
	nv, v1, v2, vp := build()
	endV := run(t, nv)

	synctest.Test(t, func(t *testing.T) {
		nr, r1, r2, rp := build()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := nr.RunRealtime(ctx, endV+time.Millisecond)
		must(t, err)
		if st.MaxLate != 0 {
			t.Errorf("events ran late in a synctest bubble: %v", st.MaxLate)
		}
		if v1.Stats() != r1.Stats() || v2.Stats() != r2.Stats() {
			t.Errorf("real time differs from virtual time:\nv %+v\nr %+v\nv %+v\nr %+v", v1.Stats(), r1.Stats(), v2.Stats(), r2.Stats())
		}
		for i := range nv.Links() {
			for _, d := range []emu.Dir{emu.AtoB, emu.BtoA} {
				if a, b := nv.Links()[i].Stats(d), nr.Links()[i].Stats(d); a != b {
					t.Errorf("link %d %v: virtual %+v real %+v", i, d, a, b)
				}
			}
		}
		// Pcap timestamps differ (wall-clock base), so compare frames only.
		if vp.Len() != rp.Len() {
			t.Errorf("pcap sizes differ: virtual %d, real %d", vp.Len(), rp.Len())
		}
	})
}

// A node port attached to an in-memory backend exchanges frames with code
// outside the emulator, through the link model, in real time.
func TestRealtimeAttachedMemPorts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := emu.NewNetwork(emu.Config{Seed: 1})
		must(t, n.AddNode("s", 2, nodes.NewL2Switch()))
		inA, outA := emu.NewMemPipe(64, 8)
		inB, outB := emu.NewMemPipe(64, 8)
		cfg := emu.LinkConfig{BitsPerSecond: 1e9, Delay: 50 * time.Microsecond}
		_, err := n.Attach("s", 0, inA, cfg)
		must(t, err)
		_, err = n.Attach("s", 1, inB, cfg)
		must(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := n.RunRealtime(ctx, 0)
			done <- err
		}()
		// However the test ends, stop the run so the bubble can finish.
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()

		const N = 200
		frame := func(i int) []byte {
			b := make([]byte, 64+emu.DefaultHeadroom)
			f := b[emu.DefaultHeadroom:]
			copy(f[0:6], []byte{2, 0, 0, 0, 0, 0xb}) // to B (flooded: unknown)
			copy(f[6:12], []byte{2, 0, 0, 0, 0, 0xa})
			f[12], f[13] = 0x88, 0xb5
			f[14] = byte(i)
			f[15] = byte(i >> 8)
			return b
		}
		start := time.Now()
		// Read concurrently, so back-pressure never builds up behind the test.
		type result struct {
			got  int
			err  string
			when time.Duration
		}
		res := make(chan result, 1)
		go func() {
			bufs := make([][]byte, 64)
			sizes := make([]int, 64)
			for i := range bufs {
				bufs[i] = make([]byte, 2048)
			}
			got := 0
			for got < N {
				k, err := outB.Read(bufs, sizes, 0)
				if err != nil {
					res <- result{got, err.Error(), 0}
					return
				}
				for j := 0; j < k; j++ {
					f := bufs[j][:sizes[j]]
					if seq := int(f[14]) | int(f[15])<<8; len(f) != 64 || seq != got {
						res <- result{got, "frame out of order or resized", 0}
						return
					}
					got++
				}
			}
			res <- result{got, "", time.Since(start)}
		}()
		for i := 0; i < N; i += 10 {
			bufs := make([][]byte, 10)
			for j := range bufs {
				bufs[j] = frame(i + j)
			}
			if k, err := outA.Write(bufs, emu.DefaultHeadroom); k != 10 || err != nil {
				t.Fatalf("write: %d %v", k, err)
			}
		}
		r := <-res
		if r.err != "" || r.got != N {
			t.Fatalf("received %d of %d: %s", r.got, N, r.err)
		}
		// Two links of 50 µs and 200 frames of 64 B at 1 Gbps (512 ns each).
		if r.when < 100*time.Microsecond+200*512*time.Nanosecond {
			t.Errorf("200 frames crossed two 50 µs links in %v", r.when)
		}
		if st, _ := n.ExtStats(inB.Name()); st.DropBackpressure != 0 {
			t.Errorf("backpressure drops: %+v", st)
		}
	})
}

// Do reaches the run from another goroutine while it runs, and runs fn
// directly once it has ended.
func TestRealtimeDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, l, _, b := pair(t, 1, emu.LinkConfig{Delay: time.Microsecond},
			nodes.TrafficConfig{Count: 1000, FrameBytes: 100, Interval: time.Microsecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := n.RunRealtime(ctx, 0); err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(500*time.Microsecond + 500*time.Nanosecond)
		var mid uint64
		n.Do(func() { mid = l.Stats(emu.AtoB).DeliveredPackets })
		if mid < 400 || mid > 600 {
			t.Errorf("delivered %d halfway through", mid)
		}
		time.Sleep(time.Millisecond)
		cancel()
		<-done
		var end int
		n.Do(func() { end = b.Stats().Unique })
		if end != 1000 {
			t.Errorf("delivered %d at the end", end)
		}
	})
}

// stallNode stalls (sleeps in its Start, as a descheduled process would)
// past a timer's due time while a frame arrives, and records the order in
// which the frame and the timer reach it.
type stallNode struct {
	stall, timerAt time.Duration
	order          []string
	frameAt        time.Duration
}

func (s *stallNode) Start(env *emu.Env) {
	env.SetTimer(s.timerAt, 1)
	time.Sleep(s.stall)
}
func (s *stallNode) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		s.order = append(s.order, "frame")
		s.frameAt = env.Now()
		env.Free(p)
	}
}
func (s *stallNode) Timer(env *emu.Env, key uint64) { s.order = append(s.order, "timer") }

// A frame that arrived while the driver was stalled is handed to the node
// before a timer that fell due after the frame arrived, and at its arrival
// time: being late must not reorder what happened.
func TestRealtimeLateKeepsArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := emu.NewNetwork(emu.Config{Seed: 1})
		node := &stallNode{stall: 10 * time.Millisecond, timerAt: 5 * time.Millisecond}
		must(t, n.AddNode("s", 1, node))
		in, out := emu.NewMemPipe(8, 8)
		_, err := n.Attach("s", 0, in, emu.LinkConfig{})
		must(t, err)
		go func() {
			time.Sleep(2 * time.Millisecond)
			b := make([]byte, 64+emu.DefaultHeadroom)
			out.Write([][]byte{b}, emu.DefaultHeadroom)
		}()
		if _, err := n.RunRealtime(context.Background(), 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if len(node.order) != 2 || node.order[0] != "frame" || node.order[1] != "timer" {
			t.Fatalf("order %v; want [frame timer]", node.order)
		}
		if node.frameAt != 2*time.Millisecond {
			t.Errorf("frame delivered at %v; want its arrival, 2ms", node.frameAt)
		}
	})
}
