//go:build linux

package procnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/inabox/inabox/emu"
)

// vethPair makes a namespace with veth a<->b, both up.
func vethPair(t *testing.T) string {
	needNetAdmin(t)
	ns := benchNS(t)
	h := nsHandle(t, ns)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a"}, PeerName: "b"}); err != nil {
		t.Fatal(err)
	}
	linkUp(t, h, "a")
	linkUp(t, h, "b")
	return ns
}

// TestPacketPortBatches: frames written in batches on one veth end arrive
// intact and in order on the other; own frames are not read back; Close
// unblocks Read.
func TestPacketPortBatches(t *testing.T) {
	ns := vethPair(t)
	testPortBatches(t, openPacket(t, ns, "a", 8), openPacket(t, ns, "b", 8))
}

// TestRingPortBatches: the same over TPACKET_V2 rings.
func TestRingPortBatches(t *testing.T) {
	ns := vethPair(t)
	open := func(dev string) emu.Port {
		var p *RingPort
		if err := InNetns(ns, func() (err error) { p, err = NewRingPort(PacketConfig{Dev: dev, BatchSize: 8}); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	testPortBatches(t, open("a"), open("b"))
}

func testPortBatches(t *testing.T, a, b emu.Port) {
	t.Helper()
	frame := benchFrame(t)
	const n = 300
	var bufs [][]byte
	for i := 0; i < n; i++ {
		f := append([]byte(nil), frame...)
		f[len(f)-5] = byte(i)
		bufs = append(bufs, append(make([]byte, 16), f...))
	}
	werr := make(chan error, 1)
	go func() { // a goroutine: with rings, Write may wait for the reader
		for sent := 0; sent < n; sent += 50 {
			if k, err := a.Write(bufs[sent:sent+50], 16); k != 50 || err != nil {
				werr <- fmt.Errorf("Write = %d, %v", k, err)
				return
			}
		}
		werr <- nil
	}()
	rb := make([][]byte, 8)
	sizes := make([]int, 8)
	for i := range rb {
		rb[i] = make([]byte, 2048)
	}
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	for got < n && time.Now().Before(deadline) {
		k, err := b.Read(rb, sizes, 4)
		if err != nil {
			t.Fatal(err)
		}
		if k > 8 {
			t.Fatalf("Read returned %d > batch", k)
		}
		for i := 0; i < k; i++ {
			if !bytes.Equal(rb[i][4:4+sizes[i]], bufs[got][16:]) {
				t.Fatalf("frame %d differs", got)
			}
			got++
		}
	}
	if got != n {
		t.Fatalf("received %d of %d", got, n)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Read(rb, sizes, 0); done <- err }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("a read its own frames back or returned early: %v", err)
	default:
	}
	a.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
}

// TestOpenErrors: a bad backend or device fails Open with a clear error
// and leaves nothing open.
func TestOpenErrors(t *testing.T) {
	ns := vethPair(t)
	node := nopNode{}
	_, err := Open(Spec{Name: "x", Node: node, Ports: 1, Netns: ns, Attach: []Attachment{{Port: 0, Backend: "carrier-pigeon", Dev: "a"}}})
	if err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Fatalf("bad backend: %v", err)
	}
	_, err = Open(Spec{Name: "x", Node: node, Ports: 1, Netns: ns, Attach: []Attachment{{Port: 0, Backend: BackendPacket, Dev: "nosuchdev"}}})
	if err == nil || !strings.Contains(err.Error(), "nosuchdev") {
		t.Fatalf("bad device: %v", err)
	}
	// A TAP made by a process that failed later is deleted.
	_, err = Open(Spec{Name: "x", Node: node, Ports: 1, Netns: ns, Attach: []Attachment{
		{Port: 0, Backend: BackendTAP, Dev: "tx0"}, {Port: 0, Backend: BackendPacket, Dev: "nosuchdev"}}})
	if err == nil {
		t.Fatal("Open succeeded")
	}
	h := nsHandle(t, ns)
	if _, err := h.LinkByName("tx0"); err == nil {
		t.Fatal("TAP tx0 left behind after a failed Open")
	}
}

type nopNode struct{}

func (nopNode) Start(*emu.Env) {}
func (nopNode) Receive(env *emu.Env, _ int, p []*emu.Packet) {
	for _, q := range p {
		env.Free(q)
	}
}
func (nopNode) Timer(*emu.Env, uint64) {}

// TestRunDoneStops: Run ends when Done reports true, and reports the port.
func TestRunDoneStops(t *testing.T) {
	ns := vethPair(t)
	calls := 0
	p, err := Open(Spec{Name: "x", Node: &tickNode{}, Ports: 1, Netns: ns,
		Done:   func() bool { calls++; return calls > 3 },
		Attach: []Attachment{{Port: 0, Backend: BackendPacket, Dev: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := p.Run(ctx)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("Run: %v (ctx %v)", err, ctx.Err())
	}
	if len(rep.Ports) != 1 || rep.Ports[0].Backend != "packet:a" {
		t.Fatalf("report %+v", rep)
	}
}

// tickNode arms a 1 ms timer again and again.
type tickNode struct{ nopNode }

func (*tickNode) Start(env *emu.Env)           { env.SetTimer(env.Now()+time.Millisecond, 1) }
func (*tickNode) Timer(env *emu.Env, _ uint64) { env.SetTimer(env.Now()+time.Millisecond, 1) }
