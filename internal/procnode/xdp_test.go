//go:build linux

package procnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/internal/testenv"
)

// xdpVeth makes a namespace with veth a<->b (one queue each), both up.
func xdpVeth(t *testing.T) (string, *netlink.Handle) {
	t.Helper()
	testenv.NeedRoot(t, "network namespace, AF_XDP")
	ns := benchNS(t)
	h := nsHandle(t, ns)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a", NumTxQueues: 1, NumRxQueues: 1},
		PeerName: "b", PeerNumTxQueues: 1, PeerNumRxQueues: 1}); err != nil {
		t.Fatal(err)
	}
	linkUp(t, h, "a")
	linkUp(t, h, "b")
	return ns, h
}

func openXDPPort(t *testing.T, ns string, cfg XDPConfig) *XDPPort {
	t.Helper()
	var p *XDPPort
	if err := InNetns(ns, func() (err error) { p, err = NewXDPPort(cfg); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func xdpAttached(t *testing.T, h *netlink.Handle, dev string) bool {
	t.Helper()
	l, err := h.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
}

// TestXDPPortBatches: frames written in batches on one veth end arrive
// byte-exact and in order on the other, both ends AF_XDP in native mode
// (veth: copy mode); own frames are not read back; Close unblocks Read,
// detaches the program and frees the port.
func TestXDPPortBatches(t *testing.T) {
	ns, h := xdpVeth(t)
	a := openXDPPort(t, ns, XDPConfig{Dev: "a", BatchSize: 8})
	b := openXDPPort(t, ns, XDPConfig{Dev: "b", BatchSize: 8})
	for _, p := range []*XDPPort{a, b} {
		if p.Mode() != XDPModeNative || p.ModeNote() != "" {
			t.Errorf("%s", p.Describe())
		}
		if p.Fd() < 0 {
			t.Errorf("Fd %d", p.Fd())
		}
	}
	t.Logf("%s; %s", a.Describe(), b.Describe())
	if !xdpAttached(t, h, "a") || !xdpAttached(t, h, "b") {
		t.Fatal("no XDP program attached")
	}
	testPortBatches(t, a, b) // closes a
	if xdpAttached(t, h, "a") {
		t.Fatal("XDP program left on a after Close")
	}
	if _, err := a.Write([][]byte{benchFrame(t)}, 0); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	b.Close()
	if xdpAttached(t, h, "b") {
		t.Fatal("XDP program left on b after Close")
	}
}

// TestXDPPortMixed: XDP in generic mode on one end, AF_PACKET on the
// other, both ways.
func TestXDPPortMixed(t *testing.T) {
	ns, _ := xdpVeth(t)
	x := openXDPPort(t, ns, XDPConfig{Dev: "a", Mode: XDPModeGeneric, BatchSize: 8})
	if x.Mode() != XDPModeGeneric || x.ZeroCopy() {
		t.Fatal(x.Describe())
	}
	frame := benchFrame(t)
	pk := openPacket(t, ns, "b", 8)
	for _, dir := range []struct{ from, to emu.Port }{{x, pk}, {pk, x}} {
		if n, err := dir.from.Write([][]byte{frame, frame}, 0); n != 2 || err != nil {
			t.Fatalf("%s Write = %d, %v", dir.from.Name(), n, err)
		}
		bufs := [][]byte{make([]byte, 2048), make([]byte, 2048)}
		sizes := make([]int, 2)
		got := 0
		for got < 2 {
			n, err := dir.to.Read(bufs[got:], sizes[got:], 0)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		for i := range 2 {
			if !bytes.Equal(bufs[i][:sizes[i]], frame) {
				t.Fatalf("%s→%s: frame %d differs", dir.from.Name(), dir.to.Name(), i)
			}
		}
	}
}

// TestXDPPortNoAlloc: Read and Write allocate nothing per batch.
func TestXDPPortNoAlloc(t *testing.T) {
	ns, _ := xdpVeth(t)
	a := openXDPPort(t, ns, XDPConfig{Dev: "a"})
	b := openXDPPort(t, ns, XDPConfig{Dev: "b"})
	frame := append(make([]byte, 16), benchFrame(t)...)
	out := make([][]byte, 32)
	for i := range out {
		out[i] = frame
	}
	in := make([][]byte, 64)
	for i := range in {
		in[i] = make([]byte, 2048)
	}
	sizes := make([]int, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.Write(out, 16); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := b.Read(in, sizes, 0)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per batch", allocs)
	}
}

// TestXDPErrors: native mode on a device without native XDP (a bridge: no ndo_bpf) fails
// saying so; auto mode gets generic; an attachment falls back to
// AF_PACKET only when asked; a device with a program already attached is
// refused; nothing is left attached.
func TestXDPErrors(t *testing.T) {
	ns, h := xdpVeth(t)
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "d0"}}); err != nil {
		t.Fatal(err)
	}
	linkUp(t, h, "d0")
	err := InNetns(ns, func() error { _, err := NewXDPPort(XDPConfig{Dev: "d0", Mode: XDPModeNative}); return err })
	want := "procnode: xdp on d0: native attach"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "native XDP unsupported by driver bridge") ||
		!strings.Contains(err.Error(), "--xdp-mode generic") || !errors.Is(err, ErrXDPUnavailable) {
		t.Fatalf("native on a bridge: %v", err)
	}
	t.Log(err)
	if xdpAttached(t, h, "d0") {
		t.Fatal("program left on d0")
	}
	g := openXDPPort(t, ns, XDPConfig{Dev: "d0"})
	if g.Mode() != XDPModeGeneric || !strings.Contains(g.ModeNote(), "unsupported by driver bridge") {
		t.Fatalf("auto on a bridge: %s", g.Describe())
	}
	// A second port on the same device: refused, the first untouched.
	err = InNetns(ns, func() error { _, err := NewXDPPort(XDPConfig{Dev: "d0"}); return err })
	if err == nil || !strings.Contains(err.Error(), "already has XDP program") {
		t.Fatalf("second port: %v", err)
	}
	g.Close()
	if xdpAttached(t, h, "d0") {
		t.Fatal("program left on d0 after Close")
	}

	att := Attachment{Port: 0, Backend: BackendXDP, Dev: "d0", XDPMode: XDPModeNative}
	_, err = Open(Spec{Name: "x", Node: nopNode{}, Ports: 1, Netns: ns, Attach: []Attachment{att}})
	if err == nil || !strings.Contains(err.Error(), "native XDP unsupported") {
		t.Fatalf("Open without fallback: %v", err)
	}
	att.XDPFallback = BackendPacket
	calls := 0
	p, err := Open(Spec{Name: "x", Node: &tickNode{}, Ports: 1, Netns: ns, Attach: []Attachment{att},
		Done: func() bool { calls++; return calls > 2 }})
	if err != nil {
		t.Fatalf("Open with fallback: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := p.Run(ctx)
	if err != nil || rep.Ports[0].Backend != "packet:d0" {
		t.Fatalf("fallback run: %+v, %v", rep, err)
	}
	// A bad device is not XDP being unavailable: no fallback.
	att.Dev = "nosuchdev"
	if _, err := Open(Spec{Name: "x", Node: nopNode{}, Ports: 1, Netns: ns, Attach: []Attachment{att}}); err == nil || !strings.Contains(err.Error(), "nosuchdev") {
		t.Fatalf("bad device: %v", err)
	}
}

// TestXDPNoPrivilege: without privilege (the test binary again, as user
// nobody) the port fails saying what it needs, as XDP unavailable.
func TestXDPNoPrivilege(t *testing.T) {
	if os.Getenv("INABOX_XDP_CHILD") == "1" {
		_, err := NewXDPPort(XDPConfig{Dev: "lo"})
		fmt.Printf("ERR %v; unavailable=%v\n", err, errors.Is(err, ErrXDPUnavailable))
		return
	}
	testenv.NeedRoot(t, "to run a child as another user")
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "child.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestXDPNoPrivilege$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "INABOX_XDP_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := "ERR procnode: xdp on lo: socket(AF_XDP): operation not permitted (needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF); unavailable=true"
	if !strings.Contains(string(out), want) {
		t.Fatalf("child said:\n%s\nwant %q", out, want)
	}
}

// TestXDPPortPolled: after PollFd, TryWrite and TryRead carry 3000 frames
// byte-exact and in order between two AF_XDP ends, a short write's rest
// passed again as the driver does (none posted twice), waiting on the
// fds with poll; Read and Write are refused; KernelStats still answers;
// neither TryWrite nor TryRead allocates.
func TestXDPPortPolled(t *testing.T) {
	ns, _ := xdpVeth(t)
	a := openXDPPort(t, ns, XDPConfig{Dev: "a", BatchSize: 16})
	b := openXDPPort(t, ns, XDPConfig{Dev: "b", BatchSize: 16})
	afd, err := a.PollFd()
	if err != nil {
		t.Fatal(err)
	}
	bfd, err := b.PollFd()
	if err != nil {
		t.Fatal(err)
	}
	if fd, _ := a.PollFd(); fd != afd {
		t.Fatalf("second PollFd %d, first %d", fd, afd)
	}
	if _, err := a.Write([][]byte{benchFrame(t)}, 0); err == nil {
		t.Fatal("Write after PollFd succeeded")
	}
	if _, err := b.Read([][]byte{make([]byte, 2048)}, []int{0}, 0); err == nil {
		t.Fatal("Read after PollFd succeeded")
	}
	frame := benchFrame(t)
	const n = 3000
	var pending [][]byte
	for i := range n {
		f := append(make([]byte, 16), frame...)
		f[len(f)-5], f[len(f)-6] = byte(i), byte(i>>8)
		pending = append(pending, f)
	}
	want := append([][]byte(nil), pending...)
	rb, sizes := make([][]byte, 16), make([]int, 16)
	for i := range rb {
		rb[i] = make([]byte, 2048)
	}
	got, short := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for got < n && time.Now().Before(deadline) {
		if len(pending) > 0 {
			k := min(len(pending), 32)
			w, err := a.TryWrite(pending[:k], 16)
			if err != nil {
				t.Fatal(err)
			}
			if w < k {
				short++
			}
			pending = pending[w:]
		}
		r, err := b.TryRead(rb, sizes, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r {
			if !bytes.Equal(rb[i][4:4+sizes[i]], want[got][16:]) {
				t.Fatalf("frame %d differs (%d bytes)", got, sizes[i])
			}
			got++
		}
		if r == 0 {
			ev := int16(unix.POLLIN)
			fds := []unix.PollFd{{Fd: int32(bfd), Events: ev}, {Fd: int32(afd), Events: unix.POLLOUT}}
			if len(pending) == 0 {
				fds = fds[:1]
			}
			unix.Poll(fds, 10)
		}
	}
	if got != n {
		t.Fatalf("received %d of %d frames (%d left to write, %d short writes)", got, n, len(pending), short)
	}
	if a.TxPackets.Load() != n || b.RxPackets.Load() != n {
		t.Fatalf("counters: tx %d rx %d, want %d", a.TxPackets.Load(), b.RxPackets.Load(), n)
	}
	if _, err := a.KernelStats(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d short writes, %d kicks", short, a.TxKicks.Load())
	one := want[:1]
	if allocs := testing.AllocsPerRun(200, func() {
		a.TryWrite(one, 16)
		b.TryRead(rb, sizes, 4)
	}); allocs != 0 {
		t.Fatalf("TryWrite and TryRead allocate %.1f times a call", allocs)
	}
}

// fwdNode forwards every frame of port 0 out of port 1.
type fwdNode struct{}

func (fwdNode) Start(*emu.Env)         {}
func (fwdNode) Timer(*emu.Env, uint64) {}
func (fwdNode) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		if port == 0 {
			env.Send(1, p)
		} else {
			env.Free(p)
		}
	}
}

// TestXDPPortPolledDriver: the real-time driver polls AF_XDP ports (no
// reader or writer goroutine): a node forwarding between two of them
// passes 3000 frames from an AF_PACKET generator to an AF_PACKET sink,
// in order.
func TestXDPPortPolledDriver(t *testing.T) {
	needNetAdmin(t)
	ns := benchNS(t)
	benchVeths(t, ns)
	s0 := openXDPPort(t, ns, XDPConfig{Dev: "s0", BatchSize: 64})
	s1 := openXDPPort(t, ns, XDPConfig{Dev: "s1", BatchSize: 64})
	gen, sink := openPacket(t, ns, "g0", 64), openPacket(t, ns, "g1", 64)
	n := emu.NewNetwork(emu.Config{Seed: 1, PreciseWake: true})
	if err := n.AddNode("s", 2, fwdNode{}); err != nil {
		t.Fatal(err)
	}
	cfg := emu.LinkConfig{BitsPerSecond: 10e9, Delay: 10 * time.Microsecond}
	for i, p := range []*XDPPort{s0, s1} {
		if _, err := n.Attach("s", i, p, cfg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		_, err := n.RunRealtime(ctx, 0)
		ran <- err
	}()
	frame := benchFrame(t)
	const count = 3000
	got := make(chan int, 1)
	go func() {
		bufs, sizes := make([][]byte, 64), make([]int, 64)
		for i := range bufs {
			bufs[i] = make([]byte, 2048)
		}
		k := 0
		for k < count {
			r, err := sink.Read(bufs, sizes, 0)
			if err != nil {
				break
			}
			for i := range r {
				f := bufs[i][:sizes[i]]
				if len(f) != len(frame) || int(f[len(f)-5])|int(f[len(f)-6])<<8 != k {
					break
				}
				k++
			}
		}
		got <- k
	}()
	time.Sleep(5 * time.Millisecond)
	for i := 0; i < count; i += 50 {
		burst := make([][]byte, 50)
		for k := range burst {
			f := append([]byte(nil), frame...)
			f[len(f)-5], f[len(f)-6] = byte(i+k), byte((i+k)>>8)
			burst[k] = f
		}
		if _, err := gen.Write(burst, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	var k int
	select {
	case k = <-got:
	case <-time.After(15 * time.Second):
		sink.Close()
		k = <-got
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if k != count {
		t.Fatalf("forwarded %d of %d in order", k, count)
	}
	if !s0.polled || !s1.polled {
		t.Fatal("the driver served the AF_XDP ports with goroutines, not by polling")
	}
}
