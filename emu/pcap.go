package emu

import (
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// PcapEpoch is the wall-clock time that run time 0 is written as in pcap
// files of virtual-time runs, so captures are byte-identical across runs.
var PcapEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type capture struct {
	w   *pcapgo.Writer
	ci  gopacket.CaptureInfo
	err error
}

func (c *capture) write(n *Network, frame []byte) {
	if c.err != nil {
		return
	}
	if n.rt != nil {
		c.ci.Timestamp = n.rt.wallStart.Add(time.Duration(n.now))
	} else {
		c.ci.Timestamp = PcapEpoch.Add(time.Duration(n.now))
	}
	c.ci.CaptureLength = len(frame)
	c.ci.Length = len(frame)
	c.err = c.w.WritePacket(c.ci, frame)
}

// Capture writes every frame sent or received on a node's port to w as a
// pcap file (nanosecond timestamps, Ethernet link type): frames sent as the
// node sends them, frames received as they are delivered (after any
// corruption). Under virtual time, timestamps are PcapEpoch plus run time.
// The caller owns w and closes it after the run.
func (n *Network) Capture(node string, port int, w io.Writer) error {
	ns := n.byName[node]
	if ns == nil {
		return fmt.Errorf("emu: Capture: no node named %q", node)
	}
	if port < 0 || port >= ns.nports {
		return &ConfigError{"capture on node " + node, "port", port, fmt.Sprintf("must be in [0, %d)", ns.nports)}
	}
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(uint32(n.cfg.MaxFrame), layers.LinkTypeEthernet); err != nil { // snap length: the largest frame
		return fmt.Errorf("emu: Capture %s:%d: %w", node, port, err)
	}
	ns.ports[port].cap = &capture{w: pw}
	return nil
}
