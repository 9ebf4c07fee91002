package main

// `inabox demo`: the emulator on its own, without the aggregation switch —
// two RDMA RC hosts through emu/nodes' learning switch over impaired links,
// a link flap and a switch crash, printing every link, port and queue-pair
// counter.

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// demoConfig configures the demo.
type demoConfig struct {
	Seed uint64
	// PcapDir, if set, receives one pcap file per node port (demoPorts).
	PcapDir string
	// Messages each host sends to the other over its RC queue pair; each is
	// an INA header with Values int32 values (one SEND Only packet).
	Messages int
	Values   int
}

// defaultDemo is the demo `inabox demo` runs (its flags change Seed,
// PcapDir and Messages).
var defaultDemo = demoConfig{Seed: 1, Messages: 20000, Values: 64}

// demoFlags are the flags of `inabox demo`, bound to cfg (set to
// defaultDemo).
func demoFlags(cfg *demoConfig) *flag.FlagSet {
	*cfg = defaultDemo
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random source")
	fs.StringVar(&cfg.PcapDir, "pcap", "", "write one pcap per port into `DIR`, named by the capturing end and then the far end (h1-sw0.pcap, sw0-h1.pcap, sw1-h2.pcap, h2-sw1.pcap)")
	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "RC messages each host sends")
	return fs
}

// cmdDemo runs `inabox demo`.
func cmdDemo(cfg *demoConfig, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usageError{msg: fmt.Sprintf("demo: takes no arguments (got %q)", args[0])}
	}
	if cfg.Messages < 1 {
		return usageError{msg: fmt.Sprintf("demo: --messages = %d: must be ≥ 1", cfg.Messages)}
	}
	res, err := runDemo(*cfg)
	if err != nil {
		return err
	}
	res.Print(stdout)
	if cfg.PcapDir != "" {
		fmt.Fprintf(stdout, "\npcap files written to %s\n", cfg.PcapDir)
	}
	return nil
}

// demoResult is what the demo measured.
type demoResult struct {
	End   time.Duration
	Hosts map[string]hostReport
	Links []linkReport
	Ports map[string]emu.NodePortStats
}

// hostReport is one host's view: its QP's counters and what it received.
type hostReport struct {
	QP rdma.Stats
	// Sent and Completed count this host's messages; Received counts the
	// peer's messages delivered, InOrder those that arrived as the next
	// expected chunk index, BadPayload those whose values were not the ones
	// sent.
	Sent, Completed, Received, InOrder, BadPayload int
	QPState                                        string
}

// linkReport is one link direction's counters.
type linkReport struct {
	Name  string
	Stats emu.LinkStats
}

type demoHost struct {
	name  string
	rep   hostReport
	data  []byte // all messages, back to back
	size  int
	next  int
	total int
}

func (d *demoHost) post(qp *rdma.QP) {
	for d.next < d.total {
		wr := rdma.WorkRequest{ID: uint64(d.next), Op: rdma.WRSend, Data: d.data[d.next*d.size : (d.next+1)*d.size]}
		if qp.PostSend(wr) != nil {
			return
		}
		d.next++
		d.rep.Sent++
	}
}

// message returns message i of a host as bytes: an INA header and values
// derived from (worker, i).
func message(buf []byte, worker uint8, i, values int) {
	h := inahdr.Header(buf)
	h.Encode(inahdr.Meta{Job: 1, AllReduce: 1, Chunk: uint32(i), Worker: worker, Bitmap: 1 << worker, Count: values})
	for v := 0; v < values; v++ {
		h.SetValue(v, int32(uint32(i)*2654435761+uint32(v)*40503+uint32(worker)))
	}
}

// demoPorts are the demo's captured ports, each with its pcap's name (by
// run.PcapName: the capturing end, then the far end; the switch's ports are
// sw0 and sw1).
var demoPorts = []struct {
	node string
	port int
	pcap string
}{
	{"h1", 0, run.PcapName("h1", run.SwitchEnd(0))},
	{"s", 0, run.PcapName(run.SwitchEnd(0), "h1")},
	{"s", 1, run.PcapName(run.SwitchEnd(1), "h2")},
	{"h2", 0, run.PcapName("h2", run.SwitchEnd(1))},
}

// runDemo runs the demo in virtual time.
//
//	h1 ──25 Gb/s, 2 µs, 1% loss, dup, reorder, corrupt── s ──10 Gb/s, 5 µs, ECN── h2
//
// h1 and h2 each send cfg.Messages RC SEND messages to the other; the h1–s
// link flaps at 2 ms and the switch crashes at 6 ms and restarts 100 µs later,
// losing its MAC table. RC recovers every loss: each host must receive every
// message exactly once, in order, intact.
func runDemo(cfg demoConfig) (demoResult, error) {
	if cfg.Values < 1 || cfg.Values > inahdr.MaxValues {
		return demoResult{}, fmt.Errorf("demo: Values = %d: must be in [1, %d]", cfg.Values, inahdr.MaxValues)
	}
	n := emu.NewNetwork(emu.Config{Seed: cfg.Seed})
	ea := rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1")}
	eb := rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.0.0.2")}
	size := inahdr.Len + 4*cfg.Values
	mk := func(name string, worker uint8, local, remote rdma.Endpoint, qpn, rqpn uint32) (*rdma.Host, *demoHost, error) {
		qp, err := rdma.NewQP(rdma.Config{Local: local, Remote: remote, QPN: qpn, RemoteQPN: rqpn, MTU: 1024,
			SendPSN: 0xFFFF00, RecvPSN: 0xFFFF00, Timeout: 4, RetryCount: 7, MaxUnacked: 64, TOS: 2})
		if err != nil {
			return nil, nil, err
		}
		d := &demoHost{name: name, data: make([]byte, cfg.Messages*size), size: size, total: cfg.Messages}
		for i := 0; i < cfg.Messages; i++ {
			message(d.data[i*size:], worker, i, cfg.Values)
		}
		h := rdma.NewHost(qp)
		h.OnStart = func(env *emu.Env, h *rdma.Host) { d.post(qp) }
		peer := 1 - worker
		h.OnCompletion = func(env *emu.Env, qp *rdma.QP, c *rdma.Completion) {
			switch c.Opcode {
			case rdma.CompSend:
				if c.Status == rdma.StatusSuccess {
					d.rep.Completed++
				}
				d.post(qp)
			case rdma.CompRecv:
				d.check(c.Data, peer, cfg.Values)
			}
		}
		return h, d, nil
	}
	h1, d1, err := mk("h1", 0, ea, eb, 0x11, 0x22)
	if err != nil {
		return demoResult{}, err
	}
	h2, d2, err := mk("h2", 1, eb, ea, 0x22, 0x11)
	if err != nil {
		return demoResult{}, err
	}
	for _, x := range []struct {
		name  string
		ports int
		node  emu.Node
	}{{"h1", 1, h1}, {"h2", 1, h2}, {"s", 2, nodes.NewL2Switch()}} {
		if err := n.AddNode(x.name, x.ports, x.node); err != nil {
			return demoResult{}, err
		}
	}
	edge := emu.LinkConfig{
		BitsPerSecond: 25e9, Delay: 2 * time.Microsecond, Jitter: 100 * time.Nanosecond, QueuePackets: 256,
		Impairments: emu.Impairments{Loss: 0.01, Duplicate: 0.005, Reorder: 0.005, ReorderDelay: 5 * time.Microsecond, Corrupt: 0.001},
	}
	core := emu.LinkConfig{BitsPerSecond: 10e9, Delay: 5 * time.Microsecond, QueueBytes: 64 << 10, ECNThresholdBytes: 16 << 10}
	l1, err := n.Connect("h1", 0, "s", 0, edge)
	if err != nil {
		return demoResult{}, err
	}
	if _, err := n.Connect("s", 1, "h2", 0, core); err != nil {
		return demoResult{}, err
	}
	n.LinkDown(2*time.Millisecond, l1)
	n.LinkUp(2*time.Millisecond+200*time.Microsecond, l1)
	if err := n.Crash(6*time.Millisecond, "s"); err != nil {
		return demoResult{}, err
	}
	if err := n.Restart(6*time.Millisecond+100*time.Microsecond, "s"); err != nil {
		return demoResult{}, err
	}
	if cfg.PcapDir != "" {
		if err := os.MkdirAll(cfg.PcapDir, 0o755); err != nil {
			return demoResult{}, err
		}
		for _, p := range demoPorts {
			f, err := os.Create(filepath.Join(cfg.PcapDir, p.pcap))
			if err != nil {
				return demoResult{}, err
			}
			defer f.Close()
			if err := n.Capture(p.node, p.port, f); err != nil {
				return demoResult{}, err
			}
		}
	}
	end, err := n.RunUntil(10 * time.Second)
	if err != nil {
		return demoResult{}, err
	}
	res := demoResult{End: end, Hosts: map[string]hostReport{}, Ports: map[string]emu.NodePortStats{}}
	for _, x := range []struct {
		d *demoHost
		h *rdma.Host
	}{{d1, h1}, {d2, h2}} {
		x.d.rep.QP = x.h.QPs[0].Stats()
		x.d.rep.QPState = x.h.QPs[0].State().String()
		res.Hosts[x.d.name] = x.d.rep
	}
	for _, l := range n.Links() {
		for _, d := range []emu.Dir{emu.AtoB, emu.BtoA} {
			res.Links = append(res.Links, linkReport{Name: l.Name() + " " + d.String(), Stats: l.Stats(d)})
		}
	}
	for _, p := range demoPorts {
		ps, _ := n.PortStats(p.node, p.port)
		res.Ports[fmt.Sprintf("%s:%d", p.node, p.port)] = ps
	}
	return res, nil
}

// check verifies a received message is the peer's next one, intact.
func (d *demoHost) check(b []byte, peer uint8, values int) {
	d.rep.Received++
	m, vals, err := inahdr.Decode(b)
	if err != nil || int(m.Chunk) != d.rep.InOrder || m.Worker != peer {
		d.rep.BadPayload++
		return
	}
	var want [4]byte
	for v := 0; v < values; v++ {
		binary.BigEndian.PutUint32(want[:], m.Chunk*2654435761+uint32(v)*40503+uint32(peer))
		if uint32(vals[v]) != binary.BigEndian.Uint32(want[:]) {
			d.rep.BadPayload++
			return
		}
	}
	d.rep.InOrder++
}

// Print writes the result as tables.
func (r demoResult) Print(w io.Writer) {
	fmt.Fprintf(w, "default scenario: RC hosts h1 <-> learning switch s <-> h2, virtual time %v\n\n", r.End)
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
	fmt.Fprintln(tw, "host\tmsgs sent\tcompleted\treceived\tin order\tbad\tretransmits\tACKs\tNAKs\tbad ICRC\tduplicates\tCE\tQP state\t")
	for _, h := range []string{"h1", "h2"} {
		s := r.Hosts[h]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", h, s.Sent, s.Completed, s.Received, s.InOrder, s.BadPayload,
			s.QP.TxRetransmits, s.QP.TxACKs, s.QP.TxNAKs, s.QP.RxBadICRC, s.QP.RxDuplicates, s.QP.RxCE, s.QPState)
	}
	tw.Flush()
}
