package nodes_test

import (
	"testing"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// macSender sends one frame to each of dsts at Start.
type macSender struct {
	src  [6]byte
	dsts [][6]byte
	got  [][6]byte // destination MACs of the frames received
}

func (s *macSender) Start(env *emu.Env) {
	for _, d := range s.dsts {
		p := env.NewPacket()
		p.SetLen(64)
		b := p.Bytes()
		copy(b[0:6], d[:])
		copy(b[6:12], s.src[:])
		env.Send(0, p)
	}
}
func (s *macSender) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		var d [6]byte
		copy(d[:], p.Bytes()[0:6])
		s.got = append(s.got, d)
		env.Free(p)
	}
}
func (s *macSender) Timer(*emu.Env, uint64) {}

// TestHostNIC: the NIC sends every endpoint frame up (even one to the
// other endpoint of the host: the network turns it back), and delivers
// frames from the wire by destination MAC, multicast to both, unknown
// dropped.
func TestHostNIC(t *testing.T) {
	a, b, far := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}, [6]byte{2, 0, 0, 0, 0, 9}
	bcast := [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ea := &macSender{src: a, dsts: [][6]byte{b, far}}
	eb := &macSender{src: b}
	// The network: a hairpin that returns every frame, and sends one to
	// each of a, the unknown MAC and broadcast.
	wire := &macSender{src: far, dsts: [][6]byte{a, {2, 0, 0, 0, 0, 7}, bcast}}
	hairpin := &echo{macSender: wire}
	nic := nodes.NewHostNIC(a, b)
	net := emu.NewNetwork(emu.Config{Seed: 1})
	for _, n := range []struct {
		name  string
		ports int
		node  emu.Node
	}{{"nic", 3, nic}, {"a", 1, ea}, {"b", 1, eb}, {"net", 1, hairpin}} {
		if err := net.AddNode(n.name, n.ports, n.node); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		a  string
		ap int
		b  string
	}{{"nic", 1, "a"}, {"nic", 2, "b"}, {"nic", 0, "net"}} {
		if _, err := net.Connect(c.a, c.ap, c.b, 0, emu.LinkConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	if len(hairpin.seen) != 2 {
		t.Errorf("the network saw %d frames, want a's 2 (to b and to far)", len(hairpin.seen))
	}
	if !sameSet(ea.got, a, bcast) {
		t.Errorf("a got %v, want the network's frame to it and the broadcast", ea.got)
	}
	if !sameSet(eb.got, b, bcast) {
		t.Errorf("b got %v, want a's frame (turned back by the network) and the broadcast", eb.got)
	}
	if nic.Up != 2 || nic.Down != 4 || nic.Unknown != 2 {
		t.Errorf("nic counters up %d down %d unknown %d, want 2 4 2 (far and the unknown MAC)", nic.Up, nic.Down, nic.Unknown)
	}
}

// echo is the network: it sends wire's frames at Start and returns every
// frame it receives.
type echo struct {
	*macSender
	seen [][6]byte
}

func (e *echo) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		var d [6]byte
		copy(d[:], p.Bytes()[0:6])
		e.seen = append(e.seen, d)
		env.Send(port, p)
	}
}

// sameSet reports whether got holds exactly want, in any order.
func sameSet(got [][6]byte, want ...[6]byte) bool {
	if len(got) != len(want) {
		return false
	}
	n := map[[6]byte]int{}
	for _, g := range got {
		n[g]++
	}
	for _, w := range want {
		if n[w]--; n[w] < 0 {
			return false
		}
	}
	return true
}
