package sw

import (
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// testWorker sends its contributions at Start and records the results.
type testWorker struct {
	frames  [][]byte
	results map[uint32][]int32
	bad     int
}

func (w *testWorker) Start(env *emu.Env) {
	for _, f := range w.frames {
		p := env.NewPacket()
		p.SetBytes(f)
		env.Send(0, p)
	}
}

func (w *testWorker) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		b := p.Bytes()
		if !rdma.CheckICRC(b) {
			w.bad++
		} else if m, v, err := inahdr.Decode(b[offBTH+rdma.BTHLen:]); err == nil && m.Flags&inahdr.FlagResult != 0 {
			w.results[m.Chunk] = v
		}
		env.Free(p)
	}
}

func (w *testWorker) Timer(env *emu.Env, key uint64) {}

// TestEmuEndToEnd: 8 workers send 16 chunks of 256 values each through the
// switch node over emulated 100 Gb/s links; every worker gets every sum.
func TestEmuEndToEnd(t *testing.T) {
	const n, chunks, nv = 8, 16, 256
	s := newTestSwitch(t, 1024)
	if err := s.SetPool(1, 0, 1024, 4); err != nil {
		t.Fatal(err)
	}
	installJob(t, s, 1, n, StageHashed, 1, 0, 40)
	net := emu.NewNetwork(emu.Config{Seed: 1})
	if err := net.AddNode("sw", 64, NewNode(s)); err != nil {
		t.Fatal(err)
	}
	want := make([][]int64, chunks)
	workers := make([]*testWorker, n)
	for w := 0; w < n; w++ {
		tw := &testWorker{results: map[uint32][]int32{}}
		for c := 0; c < chunks; c++ {
			v := make([]int32, nv)
			if want[c] == nil {
				want[c] = make([]int64, nv)
			}
			for i := range v {
				v[i] = int32(w*1000 + c*10 + i)
				want[c][i] += int64(v[i])
			}
			tw.frames = append(tw.frames, workerPkt(1, 1, uint32(c), uint8(w), v).build())
		}
		workers[w] = tw
		name := string(rune('a' + w))
		if err := net.AddNode(name, 1, tw); err != nil {
			t.Fatal(err)
		}
		if _, err := net.Connect(name, 0, "sw", w+1, emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	for w, tw := range workers {
		if tw.bad != 0 {
			t.Fatalf("worker %d: %d frames with bad ICRC", w, tw.bad)
		}
		if len(tw.results) != chunks {
			t.Fatalf("worker %d got %d results", w, len(tw.results))
		}
		for c, v := range tw.results {
			for i := range v {
				if int64(v[i]) != want[c][i] {
					t.Fatalf("worker %d chunk %d value %d = %d want %d", w, c, i, v[i], want[c][i])
				}
			}
		}
	}
	if st := s.Stats(); st.Recirculations != 3*n*chunks {
		t.Fatalf("recirculations %d", st.Recirculations)
	}
}

// TestTimedNodeRecirculationCost: with PassTime set, 256-value packets
// (4 passes) take four times the pipeline time of 64-value packets.
func TestTimedNodeRecirculationCost(t *testing.T) {
	finish := func(nv int) time.Duration {
		s := newTestSwitch(t, 1024)
		s.SetPool(1, 0, 1024, 4)
		installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
		net := emu.NewNetwork(emu.Config{Seed: 1})
		node := NewTimedNode(s, NodeConfig{PassTime: 10 * time.Nanosecond, Latency: 100 * time.Nanosecond})
		net.AddNode("sw", 64, node)
		var last time.Duration
		for w := 0; w < 2; w++ {
			tw := &testWorker{results: map[uint32][]int32{}}
			for c := 0; c < 100; c++ {
				tw.frames = append(tw.frames, workerPkt(1, 1, uint32(c), uint8(w), make([]int32, nv)).build())
			}
			name := string(rune('a' + w))
			net.AddNode(name, 1, tw)
			net.Connect(name, 0, "sw", w+1, emu.LinkConfig{})
			defer func() {
				if len(tw.results) != 100 {
					t.Errorf("nv=%d: worker got %d results", nv, len(tw.results))
				}
			}()
		}
		end, err := net.Run()
		if err != nil {
			t.Fatal(err)
		}
		last = end
		return last
	}
	t64, t256 := finish(64), finish(256)
	// 200 packets: 200 passes (2 µs) vs 800 passes (8 µs), plus latency.
	if t64 != 2*time.Microsecond+100*time.Nanosecond || t256 != 8*time.Microsecond+100*time.Nanosecond {
		t.Fatalf("finish times %v (64 values) and %v (256 values)", t64, t256)
	}
}
