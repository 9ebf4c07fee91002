package procnode

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
)

// echoNode sends every frame it receives back out of the same port.
type echoNode struct{}

func (echoNode) Start(*emu.Env) {}
func (echoNode) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		env.Send(port, p)
	}
}
func (echoNode) Timer(*emu.Env, uint64) {}

// TestUDPAttachment: a node attached to a UDP backend (BackendUDP) on
// loopback answers a datagram from its peer socket; no root needed.
func TestUDPAttachment(t *testing.T) {
	peer, err := emu.NewUDPPort(netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("127.0.0.1:9"))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	// Bind the node's socket first to learn its port, then point the peer
	// at it: the peer's remote must be exact (datagrams from elsewhere
	// are dropped).
	probe, err := emu.NewUDPPort(netip.MustParseAddrPort("127.0.0.1:0"), peer.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	local := probe.LocalAddr()
	probe.Close()
	peer.Close()
	peer, err = emu.NewUDPPort(netip.MustParseAddrPort("127.0.0.1:0"), local)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	p, err := Open(Spec{Name: "echo", Node: echoNode{}, Ports: 1,
		Attach: []Attachment{{Port: 0, Backend: BackendUDP, Dev: local.String() + "->" + peer.LocalAddr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type result struct {
		rep Report
		err error
	}
	done := make(chan result, 1)
	go func() { r, err := p.Run(ctx); done <- result{r, err} }()
	frame := make([]byte, 60)
	copy(frame, "inabox udp attachment")
	buf := [][]byte{make([]byte, 2048)}
	sizes := []int{0}
	got := make(chan int, 1)
	go func() {
		n, _ := peer.Read(buf, sizes, 0)
		got <- n
	}()
	for {
		if _, err := peer.Write([][]byte{frame}, 0); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-got:
			if n != 1 || !strings.HasPrefix(string(buf[0][:sizes[0]]), "inabox udp attachment") {
				t.Fatalf("peer got %d frames: %q", n, buf[0][:sizes[0]])
			}
			cancel()
			r := <-done
			if len(r.rep.Ports) != 1 || !strings.HasPrefix(r.rep.Ports[0].Backend, "udp:127.0.0.1:") || r.rep.Ports[0].Ext.ReadPackets == 0 || r.rep.Ports[0].Ext.WritePackets == 0 {
				t.Errorf("report: %+v", r.rep.Ports)
			}
			return
		case <-time.After(100 * time.Millisecond): // the run may not have started yet
		case <-ctx.Done():
			t.Fatal("no echo")
		}
	}
}
