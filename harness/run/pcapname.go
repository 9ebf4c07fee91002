package run

import "strconv"

// PcapName is the file name of a capture on one link, in every command that
// writes pcaps (run, up, the role processes): the end where the frames are
// captured comes first, then the far end, joined by "-".
//
// A host's end is its scenario host and its emulator node ("h0-w1.0": job 1's
// rank 0 on host h0), a PS's end its scenario name ("ps0"), a switch's end its
// port ("sw3"). So inabox run, which captures at the hosts, writes
// h0-w1.0-sw3.pcap and ps0-sw4.pcap, and the switch process of inabox up,
// which captures at its ports, writes sw3-h0-w1.0.pcap and sw4-ps0.pcap.
// An empty far end (a switch port with no scenario node) leaves it out.
func PcapName(at, to string) string {
	if to == "" {
		return at + ".pcap"
	}
	return at + "-" + to + ".pcap"
}

// SwitchEnd names switch port k as an end of a link: "sw3".
func SwitchEnd(k int) string { return "sw" + strconv.Itoa(k) }

// End names the peer's end of its link to the switch: "h0-w1.0" for a
// worker, "ps0" for a PS.
func (p Peer) End() string {
	if p.Role == "worker" {
		return p.Host + "-" + p.Node
	}
	return p.Host
}
