//go:build linux

package emu_test

import (
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/porttest"
)

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// udpPair returns two UDP ports on loopback that send to each other.
func udpPair(t testing.TB, batch int) (a, b *emu.UDPPort) {
	t.Helper()
	ca, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		ca.Close()
		t.Fatal(err)
	}
	addrA, addrB := ca.LocalAddr().(*net.UDPAddr).AddrPort(), cb.LocalAddr().(*net.UDPAddr).AddrPort()
	a, err = emu.NewUDPPortConfig(emu.UDPConfig{Conn: ca, Remote: addrB, BatchSize: batch})
	if err != nil {
		cb.Close()
		t.Fatal(err)
	}
	b, err = emu.NewUDPPortConfig(emu.UDPConfig{Conn: cb, Remote: addrA, BatchSize: batch})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return a, b
}

func TestUDPPortConformance(t *testing.T) {
	for _, batch := range []int{0, 5} {
		t.Run("batch"+strconv.Itoa(batch), func(t *testing.T) {
			porttest.Run(t, func(t *testing.T) (emu.Port, emu.Port) {
				a, b := udpPair(t, batch)
				return a, b
			})
		})
	}
}

// TestUDPPortBind checks NewUDPPort binding its own socket, and that
// datagrams from a source other than the remote address are dropped and
// counted.
func TestUDPPortBind(t *testing.T) {
	b, err := emu.NewUDPPort(loopback, netip.MustParseAddrPort("127.0.0.1:9"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.LocalAddr().Addr().IsLoopback() || b.LocalAddr().Port() == 0 {
		t.Fatalf("LocalAddr = %v", b.LocalAddr())
	}
	stranger, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Write(make([]byte, 60)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		bufs, sizes := [][]byte{make([]byte, 1514)}, []int{0}
		n, err := b.Read(bufs, sizes, 0)
		if err == nil {
			t.Errorf("Read returned %d frames from a foreign source", n)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for b.Stats().RxForeign == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := b.Stats().RxForeign; got != 1 {
		t.Errorf("RxForeign = %d, want 1", got)
	}
	b.Close()
	<-done

	if _, err := emu.NewUDPPort(loopback, netip.MustParseAddrPort("[::1]:9")); err == nil {
		t.Error("NewUDPPort accepted an IPv6 remote")
	}
}

// TestUDPPortAllocs checks that a warmed-up UDP port sends and receives a
// batch without allocating, in blocking use (Write, Read) and in polled
// use (PollFd, TryWrite, TryRead).
func TestUDPPortAllocs(t *testing.T) {
	type ops struct {
		write func(p *emu.UDPPort, bufs [][]byte) (int, error)
		read  func(p *emu.UDPPort, bufs [][]byte, sizes []int) (int, error)
	}
	for _, c := range []struct {
		name   string
		polled bool
	}{{"blocking", false}, {"polled", true}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := udpPair(t, 64)
			f := ops{
				write: func(p *emu.UDPPort, bufs [][]byte) (int, error) { return p.Write(bufs, 0) },
				read:  func(p *emu.UDPPort, bufs [][]byte, sizes []int) (int, error) { return p.Read(bufs, sizes, 0) },
			}
			if c.polled {
				for _, p := range []*emu.UDPPort{a, b} {
					if _, err := p.PollFd(); err != nil {
						t.Fatal(err)
					}
				}
				f = ops{
					write: func(p *emu.UDPPort, bufs [][]byte) (int, error) { return p.TryWrite(bufs, 0) },
					read:  func(p *emu.UDPPort, bufs [][]byte, sizes []int) (int, error) { return p.TryRead(bufs, sizes, 0) },
				}
			}
			out := makeBatch(64, 256)
			in := makeBatch(64, 1600)
			sizes := make([]int, 64)
			allocs := testing.AllocsPerRun(50, func() {
				if n, err := f.write(a, out); n != 64 || err != nil {
					t.Fatalf("write = %d, %v", n, err)
				}
				for got := 0; got < 64; {
					n, err := f.read(b, in[got:], sizes[got:])
					if err != nil {
						t.Fatalf("read: %v", err)
					}
					got += n
				}
			})
			if allocs != 0 && !c.polled && raceEnabled() {
				// x/net keeps its sendmmsg scratch in a sync.Pool, which the
				// race detector makes drop items at random (the polled path
				// has no such pool).
				t.Skipf("allocs = %v under the race detector; checked only without -race", allocs)
			}
			if allocs != 0 {
				t.Errorf("a 64-frame write+read batch allocates %v times, want 0", allocs)
			}
		})
	}
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
