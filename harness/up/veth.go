package up

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/inabox/inabox/internal/procnode"
)

// Backend choices of Config.Backend: the TAP setup (default), or the veth
// setup with the switch and peers on the veth ends through AF_PACKET, its
// rings, or AF_XDP.
var vethBackends = []string{procnode.BackendPacket, procnode.BackendRing, procnode.BackendXDP}

// xdpMTU is the veth MTU of the veth setup with AF_XDP: native XDP on veth
// takes frames of at most about 3.5 KB (one page less headroom), and an
// AF_XDP chunk holds procnode.XDPMaxFrame bytes.
const xdpMTU = 3500

// vethMode reports whether the run uses the veth setup.
func (r *session) vethMode() bool {
	return r.cfg.Backend != "" && r.cfg.Backend != procnode.BackendTAP
}

// checkBackend validates Config.Backend and the XDP options.
func (c *Config) checkBackend() error {
	switch c.Backend {
	case "", procnode.BackendTAP:
		if c.XDPMode != "" || c.XDPFallback != "" {
			return fmt.Errorf("up: --xdp-mode and --xdp-fallback need --backend xdp")
		}
		return nil
	case procnode.BackendXDP:
	case procnode.BackendPacket, procnode.BackendRing:
		if c.XDPMode != "" || c.XDPFallback != "" {
			return fmt.Errorf("up: --xdp-mode and --xdp-fallback need --backend xdp")
		}
		return nil
	default:
		return fmt.Errorf("up: unknown backend %q (want tap or one of %s)", c.Backend, strings.Join(vethBackends, ", "))
	}
	switch c.XDPMode {
	case "", procnode.XDPModeAuto, procnode.XDPModeNative, procnode.XDPModeGeneric:
	default:
		return fmt.Errorf("up: unknown --xdp-mode %q (want auto, native or generic)", c.XDPMode)
	}
	switch c.XDPFallback {
	case "", procnode.BackendPacket, procnode.BackendRing:
	default:
		return fmt.Errorf("up: unknown --xdp-fallback %q (want packet or ring)", c.XDPFallback)
	}
	return nil
}

// setupBackend builds the run's network: the TAP setup (setup) or the
// veth setup (setupVeth).
func (r *session) setupBackend() error {
	if err := r.cfg.checkBackend(); err != nil {
		return err
	}
	if r.vethMode() {
		return r.setupVeth()
	}
	return r.setup()
}

// setupVeth is setup for --backend packet|ring|xdp: no bridge and no TAP;
// the switch namespace holds the veth ends vK themselves (their far ends
// are eth0 in the peers' namespaces) and the switch process opens them
// with the backend. A switch port without a peer gets a veth pair vK-nK
// of its own. Every veth has one queue (an AF_XDP socket serves queue 0).
func (r *session) setupVeth() error {
	if err := r.workDir(); err != nil {
		return err
	}
	if err := r.createNetns(); err != nil {
		return err
	}
	swh, err := handleAt(r.swNS())
	if err != nil {
		return err
	}
	defer swh.Close()
	mtu := 9000
	if r.cfg.Backend == procnode.BackendXDP {
		mtu = xdpMTU
	}
	_, ports, err := r.prep.Node(r.prep.SwitchName())
	if err != nil {
		return err
	}
	peerOf := map[int]int{}
	for i, pe := range r.peers {
		peerOf[pe.SwitchPort] = i
	}
	for p := 0; p < ports; p++ {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v" + strconv.Itoa(p), MTU: mtu, NumTxQueues: 1, NumRxQueues: 1},
			PeerName: "n" + strconv.Itoa(p), PeerNumTxQueues: 1, PeerNumRxQueues: 1}
		i, ok := peerOf[p]
		if ok {
			fns, err := netns.GetFromName(r.peerNS(i))
			if err != nil {
				return err
			}
			v.PeerName, v.PeerNamespace = "eth0", netlink.NsFd(int(fns))
			err = swh.LinkAdd(v)
			fns.Close()
			if err != nil {
				return fmt.Errorf("up: veth %s in %s: %w", v.Name, r.swNS(), err)
			}
		} else if err := swh.LinkAdd(v); err != nil {
			return fmt.Errorf("up: veth %s in %s: %w", v.Name, r.swNS(), err)
		}
		r.devices = append(r.devices, device{r.swNS(), v.Name})
		if err := setUp(swh, v.Name, mtu); err != nil {
			return fmt.Errorf("up: %s up: %w", v.Name, err)
		}
		if !ok {
			if err := setUp(swh, v.PeerName, mtu); err != nil {
				return fmt.Errorf("up: %s up: %w", v.PeerName, err)
			}
			continue
		}
		hh, err := handleAt(r.peerNS(i))
		if err != nil {
			return err
		}
		err = setUp(hh, "eth0", mtu)
		hh.Close()
		if err != nil {
			return fmt.Errorf("up: eth0 in %s: %w", r.peerNS(i), err)
		}
	}
	return nil
}

// switchPortArgs are the switch process's port flags: --taps (the TAP
// setup) or --devs and --backend (the veth setup); it sets r.taps to the
// devices' names.
func (r *session) switchPortArgs(ports int) []string {
	prefix := "sw"
	if r.vethMode() {
		prefix = "v"
	}
	r.taps = r.taps[:0]
	for p := 0; p < ports; p++ {
		r.taps = append(r.taps, prefix+strconv.Itoa(p))
	}
	if !r.vethMode() {
		return []string{"--taps", strings.Join(r.taps, ",")}
	}
	return append([]string{"--devs", strings.Join(r.taps, ","), "--backend", r.cfg.Backend}, r.xdpArgs()...)
}

// peerBackendArgs are a peer process's backend flags (none for the TAP
// setup: the peers' default AF_PACKET).
func (r *session) peerBackendArgs() []string {
	if !r.vethMode() {
		return nil
	}
	return append([]string{"--backend", r.cfg.Backend}, r.xdpArgs()...)
}

func (r *session) xdpArgs() []string {
	var a []string
	if r.cfg.XDPMode != "" {
		a = append(a, "--xdp-mode", r.cfg.XDPMode)
	}
	if r.cfg.XDPFallback != "" {
		a = append(a, "--xdp-fallback", r.cfg.XDPFallback)
	}
	return a
}

// xdpFlags are the roles' XDP options (--xdp-mode, --xdp-fallback).
type xdpFlags struct{ mode, fallback *string }

func newXDPFlags(fs *flag.FlagSet) xdpFlags {
	return xdpFlags{
		mode: fs.String("xdp-mode", "", "with --backend xdp: auto (native, else generic; the default), native or generic"),
		fallback: fs.String("xdp-fallback", "", "with --backend xdp: packet or ring, the backend to use where XDP is unavailable "+
			"(default: none, the run fails saying why)"),
	}
}

// apply sets the XDP options of an xdp attachment.
func (x xdpFlags) apply(a *procnode.Attachment) error {
	if a.Backend != procnode.BackendXDP {
		if *x.mode != "" || *x.fallback != "" {
			return fmt.Errorf("--xdp-mode and --xdp-fallback need --backend xdp")
		}
		return nil
	}
	a.XDPMode, a.XDPFallback = *x.mode, *x.fallback
	return nil
}
