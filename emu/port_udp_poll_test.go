//go:build linux

package emu_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// tryReadAll reads want frames with TryRead, polling until a deadline.
func tryReadAll(t *testing.T, p *emu.UDPPort, bufs [][]byte, want int) [][]byte {
	t.Helper()
	sizes := make([]int, len(bufs))
	var got [][]byte
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := p.TryRead(bufs, sizes, 0)
		if err != nil {
			t.Fatalf("TryRead: %v", err)
		}
		if n == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		for i := range n {
			got = append(got, append([]byte(nil), bufs[i][:sizes[i]]...))
		}
	}
	return got
}

// TestUDPPortPolled: a UDP port in polled use (PollPort) reads and writes
// without waiting, frame for frame as in blocking use, drops what does not
// come from its remote address, refuses an oversize frame, and no longer
// serves Read.
func TestUDPPortPolled(t *testing.T) {
	a, b := udpPair(t, 8)
	fd, err := a.PollFd()
	if err != nil || fd < 0 {
		t.Fatalf("PollFd = %d, %v", fd, err)
	}
	if fd2, _ := a.PollFd(); fd2 != fd {
		t.Fatalf("a second PollFd gave fd %d, the first %d", fd2, fd)
	}
	in := makeBatch(8, 1600)
	sizes := make([]int, 8)
	if n, err := a.TryRead(in, sizes, 0); n != 0 || err != nil {
		t.Fatalf("TryRead with nothing queued = %d, %v", n, err)
	}
	// b → a, more than one batch
	out := make([][]byte, 20)
	for i := range out {
		out[i] = frame64(uint32(i))
	}
	if n, err := b.Write(out, 0); n != len(out) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := tryReadAll(t, a, in, len(out))
	if len(got) != len(out) {
		t.Fatalf("TryRead got %d of %d frames", len(got), len(out))
	}
	for i := range got {
		if string(got[i]) != string(out[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	// a → b with TryWrite, with headroom
	const off = 16
	wb := make([][]byte, 20)
	for i := range wb {
		wb[i] = append(make([]byte, off), frame64(uint32(100+i))...)
	}
	if n, err := a.TryWrite(wb, off); n != len(wb) || err != nil {
		t.Fatalf("TryWrite = %d, %v", n, err)
	}
	for i := 0; i < len(wb); {
		n, err := b.Read(in, sizes, 0)
		if err != nil {
			t.Fatal(err)
		}
		for k := range n {
			if string(in[k][:sizes[k]]) != string(wb[i][off:]) {
				t.Fatalf("frame %d differs", i)
			}
			i++
		}
	}
	// an oversize frame ends TryWrite with ErrFrameTooLarge, the ones
	// before it sent
	big := [][]byte{frame64(1), make([]byte, emu.UDPMaxFrame+1), frame64(2)}
	if n, err := a.TryWrite(big, 0); n != 1 || !errors.Is(err, emu.ErrFrameTooLarge) {
		t.Fatalf("TryWrite with an oversize frame = %d, %v", n, err)
	}
	if n, err := b.Read(in, sizes, 0); n != 1 || err != nil || sizes[0] != 64 {
		t.Fatalf("Read after the oversize TryWrite = %d, %v", n, err)
	}
	// a foreign datagram is dropped and counted
	stranger, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(a.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Write(frame64(7)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([][]byte{frame64(8)}, 0); err != nil {
		t.Fatal(err)
	}
	got = tryReadAll(t, a, in, 1)
	if len(got) != 1 || string(got[0]) != string(frame64(8)) || a.Stats().RxForeign != 1 {
		t.Fatalf("after a foreign datagram: %d frames, RxForeign %d", len(got), a.Stats().RxForeign)
	}
	st := a.Stats()
	if st.FramesRead != 21 || st.FramesWritten != 21 || st.TxOversize != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := a.Read(in, sizes, 0); err == nil {
		t.Fatal("Read works after PollFd")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryRead(in, sizes, 0); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("TryRead after Close: %v", err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestUDPPortPolledDriver: a switch whose ports are UDP sockets runs under
// the polled real-time driver (UDPPort is a PollPort) and forwards every
// frame, in order.
func TestUDPPortPolledDriver(t *testing.T) {
	u0, gen := udpPair(t, 0)  // gen → the switch's port 0
	u1, sink := udpPair(t, 0) // the switch's port 1 → sink
	in0, in1 := &pollSpy{UDPPort: u0}, &pollSpy{UDPPort: u1}
	n := emu.NewNetwork(emu.Config{Seed: 1, PreciseWake: true})
	must(t, n.AddNode("s", 2, nodes.NewL2Switch()))
	cfg := emu.LinkConfig{BitsPerSecond: 10e9, Delay: 10 * time.Microsecond}
	_, err := n.Attach("s", 0, in0, cfg)
	must(t, err)
	_, err = n.Attach("s", 1, in1, cfg)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		_, err := n.RunRealtime(ctx, 0)
		ran <- err
	}()
	const count = 3000
	got := make(chan []uint32, 1)
	go func() {
		var seqs []uint32
		bufs, sizes := makeBatch(64, 1600), make([]int, 64)
		for len(seqs) < count {
			k, err := sink.Read(bufs, sizes, 0)
			if err != nil {
				break
			}
			for i := range k {
				if sizes[i] == 64 {
					seqs = append(seqs, uint32(bufs[i][20])<<24|uint32(bufs[i][21])<<16|uint32(bufs[i][22])<<8|uint32(bufs[i][23]))
				}
			}
		}
		got <- seqs
	}()
	time.Sleep(2 * time.Millisecond)
	for i := 0; i < count; i += 50 {
		burst := make([][]byte, 50)
		for k := range burst {
			burst[k] = frame64(uint32(i + k))
		}
		if _, err := gen.Write(burst, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	var seqs []uint32
	select {
	case seqs = <-got:
	case <-time.After(15 * time.Second):
		sink.Close()
		seqs = <-got
	}
	cancel()
	must(t, <-ran)
	if len(seqs) != count {
		t.Fatalf("forwarded %d of %d", len(seqs), count)
	}
	for i, s := range seqs {
		if s != uint32(i) {
			t.Fatalf("frame %d is %d: out of order", i, s)
		}
	}
	for _, name := range []string{in0.Name(), in1.Name()} {
		if s, _ := n.ExtStats(name); s.ReadErr != "" {
			t.Fatalf("%s: read error %s", name, s.ReadErr)
		}
	}
	if !in0.polled.Load() || !in1.polled.Load() {
		t.Fatal("the driver served the UDP ports with goroutines, not by polling")
	}
}

// pollSpy is a UDP port that records whether the driver asked for its fd.
type pollSpy struct {
	*emu.UDPPort
	polled atomic.Bool
}

func (p *pollSpy) PollFd() (int, error) {
	p.polled.Store(true)
	return p.UDPPort.PollFd()
}
