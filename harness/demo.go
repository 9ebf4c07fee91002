// Package harness runs scenarios on the emulator and reports what happened.
//
// Until the experiment runner lands, it holds the embedded default scenario:
// two hosts exchanging numbered frames through a learning switch over
// impaired links, with a link flap and a switch crash, printing every counter.
package harness

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"inabox/emu"
	"inabox/emu/nodes"
)

// DemoConfig configures the default scenario.
type DemoConfig struct {
	Seed uint64
	// PcapDir, if set, receives one pcap file per node port.
	PcapDir string
	// Frames each host sends, FrameBytes long, one every Interval.
	Frames     int
	FrameBytes int
	Interval   time.Duration
}

// DefaultDemo is the embedded default scenario.
var DefaultDemo = DemoConfig{Seed: 1, Frames: 20000, FrameBytes: 1000, Interval: 700 * time.Nanosecond}

// DemoResult is what the default scenario measured.
type DemoResult struct {
	End   time.Duration
	Hosts map[string]nodes.TrafficStats
	Links []LinkReport
	Ports map[string]emu.NodePortStats
}

// LinkReport is one link direction's counters.
type LinkReport struct {
	Name  string
	Stats emu.LinkStats
}

// RunDemo runs the default scenario in virtual time.
//
//	h1 ──25 Gb/s, 2 µs, 1% loss, dup, reorder, corrupt── s ──10 Gb/s, 5 µs, ECN── h2
//
// Each host sends cfg.Frames frames to the other; the h1–s link flaps at 5 ms
// and the switch crashes at 12 ms and restarts 100 µs later, losing its MAC
// table.
func RunDemo(cfg DemoConfig) (DemoResult, error) {
	n := emu.NewNetwork(emu.Config{Seed: cfg.Seed})
	a := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1"), Port: 4000}
	b := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.0.0.2"), Port: 4000}
	h1 := nodes.NewTraffic(nodes.TrafficConfig{Local: a, Remote: b, Count: cfg.Frames, FrameBytes: cfg.FrameBytes, Interval: cfg.Interval, ECN: true})
	h2 := nodes.NewTraffic(nodes.TrafficConfig{Local: b, Remote: a, Count: cfg.Frames, FrameBytes: cfg.FrameBytes, Interval: cfg.Interval, ECN: true})
	for _, x := range []struct {
		name  string
		ports int
		node  emu.Node
	}{{"h1", 1, h1}, {"h2", 1, h2}, {"s", 2, nodes.NewL2Switch()}} {
		if err := n.AddNode(x.name, x.ports, x.node); err != nil {
			return DemoResult{}, err
		}
	}
	edge := emu.LinkConfig{
		BitsPerSecond: 25e9, Delay: 2 * time.Microsecond, Jitter: 100 * time.Nanosecond, QueuePackets: 256,
		Impairments: emu.Impairments{Loss: 0.01, Duplicate: 0.005, Reorder: 0.005, ReorderDelay: 5 * time.Microsecond, Corrupt: 0.001},
	}
	core := emu.LinkConfig{BitsPerSecond: 10e9, Delay: 5 * time.Microsecond, QueueBytes: 256 << 10, ECNThresholdBytes: 64 << 10}
	l1, err := n.Connect("h1", 0, "s", 0, edge)
	if err != nil {
		return DemoResult{}, err
	}
	if _, err := n.Connect("s", 1, "h2", 0, core); err != nil {
		return DemoResult{}, err
	}
	n.LinkDown(5*time.Millisecond, l1)
	n.LinkUp(5*time.Millisecond+200*time.Microsecond, l1)
	if err := n.Crash(12*time.Millisecond, "s"); err != nil {
		return DemoResult{}, err
	}
	if err := n.Restart(12*time.Millisecond+100*time.Microsecond, "s"); err != nil {
		return DemoResult{}, err
	}
	ports := []struct {
		node string
		port int
	}{{"h1", 0}, {"s", 0}, {"s", 1}, {"h2", 0}}
	if cfg.PcapDir != "" {
		if err := os.MkdirAll(cfg.PcapDir, 0o755); err != nil {
			return DemoResult{}, err
		}
		for _, p := range ports {
			f, err := os.Create(filepath.Join(cfg.PcapDir, fmt.Sprintf("%s-%d.pcap", p.node, p.port)))
			if err != nil {
				return DemoResult{}, err
			}
			defer f.Close()
			if err := n.Capture(p.node, p.port, f); err != nil {
				return DemoResult{}, err
			}
		}
	}
	end, err := n.Run()
	if err != nil {
		return DemoResult{}, err
	}
	res := DemoResult{End: end, Hosts: map[string]nodes.TrafficStats{"h1": h1.Stats(), "h2": h2.Stats()}, Ports: map[string]emu.NodePortStats{}}
	for _, l := range n.Links() {
		for _, d := range []emu.Dir{emu.AtoB, emu.BtoA} {
			res.Links = append(res.Links, LinkReport{Name: l.Name() + " " + d.String(), Stats: l.Stats(d)})
		}
	}
	for _, p := range ports {
		ps, _ := n.PortStats(p.node, p.port)
		res.Ports[fmt.Sprintf("%s:%d", p.node, p.port)] = ps
	}
	return res, nil
}

// Print writes the result as tables.
func (r DemoResult) Print(w io.Writer) {
	fmt.Fprintf(w, "default scenario: h1 <-> s <-> h2, virtual time %v\n\n", r.End)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "link direction\tsent\tdelivered\tdown\tmtu\tqueue\tloss\tdup\treorder\tcorrupt\tecn\tq-hw pkts\tq-hw bytes\t")
	for _, l := range r.Links {
		s := l.Stats
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", l.Name, s.SentPackets, s.DeliveredPackets,
			s.Drops.LinkDown, s.Drops.MTU, s.Drops.Queue, s.Drops.Loss, s.Duplicated, s.Reordered, s.Corrupted, s.ECNMarked,
			s.QueueHighWaterPackets, s.QueueHighWaterBytes)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "port\ttx pkts\ttx bytes\trx pkts\trx bytes\tdrop node-down\t")
	for _, k := range []string{"h1:0", "s:0", "s:1", "h2:0"} {
		p := r.Ports[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", k, p.TxPackets, p.TxBytes, p.RxPackets, p.RxBytes, p.DropNodeDown)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "host\tsent\treceived\tunique\tduplicates\treordered\tcorrupt\tCE-marked\tfirst rx\tlast rx\t")
	for _, h := range []string{"h1", "h2"} {
		s := r.Hosts[h]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t\n", h, s.Sent, s.Received, s.Unique, s.Duplicates, s.Reordered, s.Corrupt, s.CEMarked, s.FirstRx, s.LastRx)
	}
	tw.Flush()
}
