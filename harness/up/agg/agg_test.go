package agg

import (
	"testing"
	"time"

	"inabox/emu"
	sw "inabox/switch"

	"inabox/harness/up/swctl"
)

// TestVirtualAllReduce runs the worker and PS nodes against the switch node
// under virtual time, over lossy links, and checks every worker's sum.
func TestVirtualAllReduce(t *testing.T) {
	const n, values = 4, 100_000
	l := Layout{Job: 3, Workers: n, PerPacket: 256, Window: 32, Policy: sw.PolicyStatic, Slots: 1024}
	s, err := sw.New(sw.Config{Slots: l.Slots, Ports: l.Ports()})
	if err != nil {
		t.Fatal(err)
	}
	if err := swctl.Apply(s, l.SwitchConfig()); err != nil {
		t.Fatal(err)
	}
	net := emu.NewNetwork(emu.Config{Seed: 7})
	if err := net.AddNode("sw", l.Ports(), sw.NewNode(s)); err != nil {
		t.Fatal(err)
	}
	link := emu.LinkConfig{BitsPerSecond: 10e9, Delay: 2 * time.Microsecond, Impairments: emu.Impairments{Loss: 0.01}}
	ws := make([]*Worker, n)
	for w := range n {
		ws[w] = NewWorker(WorkerConfig{Job: l.Job, AllReduce: 1, Worker: uint8(w), Seed: 5, Values: values, PerPacket: l.PerPacket,
			Window: l.Window, RTO: 200 * time.Microsecond})
		name := string(rune('a' + w))
		if err := net.AddNode(name, 1, ws[w]); err != nil {
			t.Fatal(err)
		}
		if _, err := net.Connect(name, 0, "sw", w, link); err != nil {
			t.Fatal(err)
		}
	}
	ps := &PS{}
	net.AddNode("ps", 1, ps)
	net.Connect("ps", 0, "sw", l.PSPort(), link)
	if _, err := net.RunUntil(time.Second); err != nil {
		t.Fatal(err)
	}
	for w, wk := range ws {
		st := wk.Stats()
		if !st.Done {
			t.Fatalf("worker %d not done: %+v", w, st)
		}
		for i, v := range wk.Result {
			var want int32
			for k := range n {
				want += Value(5, k, i)
			}
			if v != want {
				t.Fatalf("worker %d value %d = %d, want %d", w, i, v, want)
			}
		}
		if st.Resent == 0 {
			t.Errorf("worker %d: no retransmissions despite 1%% loss", w)
		}
	}
	if ps.Stats().Collisions != 0 {
		t.Errorf("PS saw collisions: %+v", ps.Stats())
	}
}
