package run

import "testing"

// TestPcapName: a capture is named by its capturing end, then its far end;
// the two ends of one link give mirrored names.
func TestPcapName(t *testing.T) {
	w := Peer{Role: "worker", Host: "h0", Node: "w1.0"}
	ps := Peer{Role: "ps", Host: "ps0", Node: "ps"}
	for _, c := range []struct{ got, want string }{
		{PcapName(w.End(), SwitchEnd(2)), "h0-w1.0-sw2.pcap"},
		{PcapName(SwitchEnd(2), w.End()), "sw2-h0-w1.0.pcap"},
		{PcapName(ps.End(), SwitchEnd(0)), "ps0-sw0.pcap"},
		{PcapName(SwitchEnd(0), ps.End()), "sw0-ps0.pcap"},
		{PcapName(SwitchEnd(7), Peer{}.End()), "sw7.pcap"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}
