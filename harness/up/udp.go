package up

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/inabox/inabox/internal/procnode"
)

// Transports of Config.Transport.
const (
	// TransportTAP: the switch serves one TAP per port, bridged to a veth
	// whose far end is the peer's eth0 (AF_PACKET). The default.
	TransportTAP = "tap"
	// TransportUDP: namespaces stand in for machines joined by a routed
	// IP network; every emulated port is a UDP socket (one Ethernet frame
	// per datagram) and the clocks start at the network barrier, as
	// processes on different machines would run.
	TransportUDP = "udp"
)

// The UDP transport's layout (docs/processes.md, "Across machines (UDP)"):
//
//	 inabox-sw-ID            inabox-rt-ID (router, ip_forward)         inabox-w1.0-ID
//	┌────────────────┐      ┌──────────────────────────────────┐      ┌────────────────┐
//	│ inaswitch      │      │ n0 10.77.0.1/24   n2 10.77.2.1/24 │      │ inahost w1.0   │
//	│  port K: UDP   │      │                                  │      │  UDP           │
//	│  10.77.0.2:7000+K ─ eth0 ══veth══ n0 ─ route ─ n2 ══veth══ eth0 ─ 10.77.2.2:7000│
//	│  barrier :7100 │      └──────────────────────────────────┘      └────────────────┘
//	└────────────────┘
//
// Node i (0 the switch, then the peers in Prepared.Peers order) has the
// subnet 10.77.i.0/24: eth0 10.77.i.2 in its namespace, n<i> 10.77.i.1 in
// the router's, and a default route through it. No bridge, no TAP.
const (
	udpNet         = "10.77"
	udpSwitchBase  = 7000 // the switch's socket for port K: 7000+K
	udpPeerPort    = 7000 // every peer's socket
	udpBarrierPort = 7100 // TCP
	// udpMTU carries a 9000-byte emulated frame in one datagram (9000 +
	// 8 UDP + 20 IPv4), with room.
	udpMTU = 9100
)

func (r *session) udp() bool { return r.cfg.Transport == TransportUDP }

func (r *session) routerNS() string { return NamePrefix + "rt-" + r.id }

// nodeIP is node i's address (0: the switch, i+1: peer i); gateway is
// the router's on that subnet.
func nodeIP(i int) netip.Addr    { return netip.MustParseAddr(fmt.Sprintf("%s.%d.2", udpNet, i)) }
func gatewayIP(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("%s.%d.1", udpNet, i)) }

func (r *session) barrierAddr() string {
	return netip.AddrPortFrom(nodeIP(0), udpBarrierPort).String()
}

// checkUDP refuses what the UDP layout cannot address.
func checkUDP(nPeers, ports int) error {
	if nPeers+1 > 255 {
		return fmt.Errorf("up: --transport udp: %d nodes, at most 255 (one /24 each)", nPeers+1)
	}
	if udpSwitchBase+ports > 65535 {
		return fmt.Errorf("up: --transport udp: %d switch ports do not fit UDP ports from %d", ports, udpSwitchBase)
	}
	return nil
}

// setupUDP creates the work directory, a namespace per node and the
// router's, and per node a veth to the router with its subnet and a
// default route; the router forwards.
func (r *session) setupUDP() error {
	if err := r.workDir(); err != nil {
		return err
	}
	if err := r.createNetns(r.routerNS()); err != nil {
		return err
	}
	nodes := []string{r.swNS()}
	for i := range r.peers {
		nodes = append(nodes, r.peerNS(i))
	}
	err := procnode.InNetns(r.routerNS(), func() error {
		// /proc/sys/net is the calling thread's namespace's.
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("up: ip_forward in %s: %w", r.routerNS(), err)
	}
	rh, err := handleAt(r.routerNS())
	if err != nil {
		return err
	}
	defer rh.Close()
	if err := loUp(rh); err != nil {
		return fmt.Errorf("up: lo in %s: %w", r.routerNS(), err)
	}
	for i, ns := range nodes {
		fns, err := netns.GetFromName(ns)
		if err != nil {
			return err
		}
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "n" + strconv.Itoa(i), MTU: udpMTU},
			PeerName: "eth0", PeerNamespace: netlink.NsFd(int(fns))}
		err = rh.LinkAdd(v)
		fns.Close()
		if err != nil {
			return fmt.Errorf("up: veth %s in %s: %w", v.Name, r.routerNS(), err)
		}
		r.devices = append(r.devices, device{r.routerNS(), v.Name})
		if err := setUp(rh, v.Name, udpMTU); err != nil {
			return fmt.Errorf("up: %s in %s: %w", v.Name, r.routerNS(), err)
		}
		if err := addAddr(rh, v.Name, gatewayIP(i)); err != nil {
			return fmt.Errorf("up: %s in %s: %w", v.Name, r.routerNS(), err)
		}
		hh, err := handleAt(ns)
		if err != nil {
			return err
		}
		err = func() error {
			defer hh.Close()
			if err := loUp(hh); err != nil {
				return err
			}
			if err := setUp(hh, "eth0", udpMTU); err != nil {
				return err
			}
			if err := addAddr(hh, "eth0", nodeIP(i)); err != nil {
				return err
			}
			l, err := hh.LinkByName("eth0")
			if err != nil {
				return err
			}
			return hh.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.IP(gatewayIP(i).AsSlice())})
		}()
		if err != nil {
			return fmt.Errorf("up: eth0 in %s: %w", ns, err)
		}
	}
	return nil
}

func loUp(h *netlink.Handle) error {
	l, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	return h.LinkSetUp(l)
}

func addAddr(h *netlink.Handle, dev string, ip netip.Addr) error {
	l, err := h.LinkByName(dev)
	if err != nil {
		return err
	}
	return h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ip.AsSlice()), Mask: net.CIDRMask(24, 32)}})
}

// udpSwitchArgs are the switch's network flags: a UDP socket per port,
// each towards its peer's socket, and the barrier.
func (r *session) udpSwitchArgs(ports int) []string {
	args := []string{"--netns", r.swNS()}
	peerOf := map[int]int{}
	for i, pe := range r.peers {
		peerOf[pe.SwitchPort] = i
	}
	for k := 0; k < ports; k++ {
		local := netip.AddrPortFrom(nodeIP(0), uint16(udpSwitchBase+k))
		remote := netip.MustParseAddrPort("127.0.0.1:9") // a port no peer uses: discard
		if i, ok := peerOf[k]; ok {
			remote = netip.AddrPortFrom(nodeIP(i+1), udpPeerPort)
		}
		args = append(args, "--port", fmt.Sprintf("%d=udp:%s->%s", k, local, remote))
	}
	return args
}

// udpPeerArgs are peer i's network flags: its UDP socket towards its
// switch port's.
func (r *session) udpPeerArgs(i int) []string {
	local := netip.AddrPortFrom(nodeIP(i+1), udpPeerPort)
	remote := netip.AddrPortFrom(nodeIP(0), uint16(udpSwitchBase+r.peers[i].SwitchPort))
	return []string{"--netns", r.peerNS(i), "--port", fmt.Sprintf("udp:%s->%s", local, remote)}
}

// udpSyncArgs: the switch listens for every peer at the barrier; the
// peers connect to it.
func (r *session) udpSyncArgs(name string) []string {
	if name == switchProc {
		return []string{"--barrier-listen", r.barrierAddr(), "--barrier-peers", strconv.Itoa(len(r.peers)), "--result", r.udpResultFile()}
	}
	// A switch a fault restarts listens again: the peers rejoin it.
	return []string{"--barrier", r.barrierAddr(), "--barrier-rejoin", "30s"}
}

// watchBarrier connects the orchestrator to the switch's barrier as an
// observer, from the router's namespace, once the switch runs: it learns
// the run's time 0 as the processes do (watchStart). It returns when the
// switch has accepted it, so no peer's readiness can start the run first.
func (r *session) watchBarrier(ctx context.Context) error {
	accepted := make(chan struct{})
	r.barrierCh = make(chan barrierResult, 1)
	c := BarrierClient{Addr: r.barrierAddr(), Name: "inabox-up", Watch: true, ConnectTimeout: 20 * time.Second,
		Dial: dialIn(r.routerNS()), Connected: func() { close(accepted) }}
	go func() {
		z, err := c.Wait(ctx) // ends with ctx
		r.barrierCh <- barrierResult{z, err}
	}()
	swp := r.current[switchProc]
	select {
	case <-accepted:
		return nil
	case x := <-r.barrierCh:
		return fmt.Errorf("up: the switch's start barrier: %w", x.err)
	case <-swp.done:
		return r.died(swp)
	case <-ctx.Done():
		return fmt.Errorf("up: stopped (%v) while connecting to the switch's barrier", context.Cause(ctx))
	}
}

// barrierResult is a barrier wait's outcome.
type barrierResult struct {
	zero time.Time
	err  error
}

// udpStartClocks waits for the barrier's start (every process ready) and
// sets the run's time 0; it writes the start file too, from which a
// process a fault restarts continues the run's clock (--restarted).
func (r *session) udpStartClocks(ctx context.Context) error {
	for {
		select {
		case x := <-r.barrierCh:
			if x.err != nil {
				return fmt.Errorf("up: the switch's start barrier: %w", x.err)
			}
			r.zero = x.zero
			return r.writeStart()
		case p := <-r.exits:
			if !p.killed {
				return r.died(p)
			}
		case <-ctx.Done():
			return fmt.Errorf("up: stopped (%v) before every process was ready", context.Cause(ctx))
		}
	}
}

// writeStart writes the run's time 0 into the start file.
func (r *session) writeStart() error {
	startFile := filepath.Join(r.dir, "start")
	if err := os.WriteFile(startFile+".tmp", []byte(strconv.FormatInt(r.zero.UnixNano(), 10)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(startFile+".tmp", startFile)
}

// udpResultFile is where the switch writes the run's combined result at
// the barrier's end (--result).
func (r *session) udpResultFile() string { return filepath.Join(r.dir, "result.json") }

// udpEndTimeout bounds how long the processes take to end by themselves
// once every worker is done (the barrier's stop, the reports).
const udpEndTimeout = 30 * time.Second

// udpWaitEnd waits, once every worker is done, for every process to end
// by itself through the barrier's end phase (the switch stops every peer
// and exits once it has their reports), and reads the switch's combined
// result into sw. A process that fails, or does not end within
// udpEndTimeout, is an error.
func (r *session) udpWaitEnd(ctx context.Context, sw *Result) error {
	deadline := time.NewTimer(udpEndTimeout)
	defer deadline.Stop()
	names := []string{switchProc}
	for _, pe := range r.peers {
		names = append(names, pe.Node)
	}
	for _, n := range names {
		p := r.current[n]
		select {
		case <-p.done:
		case <-deadline.C:
			return fmt.Errorf("up: %s did not end within %v of every worker's done (the barrier's end phase)", p.name, udpEndTimeout)
		case <-ctx.Done():
			return fmt.Errorf("up: stopped (%v) while the processes ended", context.Cause(ctx))
		}
		if p.err != nil {
			return r.died(p)
		}
	}
	if err := readJSON(r.udpResultFile(), sw); err != nil {
		return fmt.Errorf("up: the switch's result: %w", err)
	}
	return nil
}
