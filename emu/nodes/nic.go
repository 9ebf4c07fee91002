package nodes

import "github.com/inabox/inabox/emu"

// HostNIC is the NIC of a host that several endpoints share (a worker and
// its job's parameter server on one machine): port 0 is the host's one
// link to the network and port i+1 the internal link to endpoint i. Every
// frame an endpoint sends leaves on port 0, even one addressed to another
// endpoint of the same host, so that the network sees it (as a NIC in VEPA
// mode: an in-network aggregation switch must see a worker's contribution
// to its own host's PS, and sends it back). A frame from port 0 goes to
// the endpoint of its destination MAC; a broadcast or multicast one to
// every endpoint; one to an unknown MAC is dropped and counted. It keeps
// no state but its counters.
type HostNIC struct {
	macs map[[6]byte]int
	// Up counts frames sent up to the network, Down frames delivered to an
	// endpoint (each copy), Unknown frames dropped for an unknown
	// destination.
	Up, Down, Unknown uint64
}

// NewHostNIC returns the NIC of the endpoints of MACs macs: endpoint i,
// with MAC macs[i], is on port i+1. The node needs len(macs)+1 ports.
func NewHostNIC(macs ...[6]byte) *HostNIC {
	n := &HostNIC{macs: make(map[[6]byte]int, len(macs))}
	for i, m := range macs {
		n.macs[m] = i + 1
	}
	return n
}

// Start implements emu.Node.
func (n *HostNIC) Start(*emu.Env) {}

// Timer implements emu.Node.
func (n *HostNIC) Timer(*emu.Env, uint64) {}

// AcceptsDeferred implements emu.DeferAware: the NIC forwards by MAC
// address and reads no check.
func (n *HostNIC) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (n *HostNIC) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		if port != 0 {
			n.Up++
			env.Send(0, p)
			continue
		}
		b := p.Bytes()
		if len(b) < ethLen {
			n.Unknown++
			env.Free(p)
			continue
		}
		var dst [6]byte
		copy(dst[:], b[0:6])
		if dst[0]&1 != 0 { // broadcast, multicast: every endpoint
			last := env.Ports() - 1
			if last < 1 {
				env.Free(p)
				continue
			}
			for o := 1; o < last; o++ {
				n.Down++
				env.Send(o, env.Clone(p))
			}
			n.Down++
			env.Send(last, p)
			continue
		}
		out, ok := n.macs[dst]
		if !ok || out >= env.Ports() {
			n.Unknown++
			env.Free(p)
			continue
		}
		n.Down++
		env.Send(out, p)
	}
}
