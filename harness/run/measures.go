package run

import (
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/testbed"
)

// Measures are what a run in virtual time gives for `inabox up
// --vs-virtual` to set its processes' measures against, beside the
// results: the counters of every link to the switch and every worker's
// all-reduce times. Run fills them in when Options.Measures is set.
type Measures struct {
	// Links are the links to the switch, by the peer at their other end as
	// Prepared.Peers names it: a worker or a PS, and for a host a worker
	// shares with its job's PS (the host's NIC on the link) the worker.
	Links map[string]LinkMeasure
	// Workers are every worker's all-reduces, job by job, rank by rank.
	Workers []WorkerMeasure
	// PacketHops are the packets delivered over every link direction (a
	// packet that crosses two links counts twice) and Events the
	// emulator's events: what the run cost to emulate, not what the
	// emulated network did (docs/emulator.md).
	PacketHops, Events uint64
}

// LinkMeasure is one link's two directions at the end of a run.
type LinkMeasure struct {
	ToSwitch, FromSwitch emu.LinkStats
}

// WorkerMeasure is one worker's all-reduces, as the worker reports them.
type WorkerMeasure struct {
	Job        string // the scenario's job name
	Rank       int
	Node       string
	AllReduces []Span
}

// Span is one all-reduce's start and end, in virtual time.
type Span struct{ Start, End time.Duration }

// measure fills m from the runner's testbed. Its links are named as
// Prepared.Peers names their peers (the one place that knows a co-located
// host's NIC stands for its worker); where Peers refuses the topology,
// by the node at the far end.
func (r *runner) measure(m *Measures) {
	m.Links = map[string]LinkMeasure{}
	m.PacketHops, m.Events = 0, r.tb.Net.Events
	for _, l := range r.tb.Net.Links() {
		m.PacketHops += l.Stats(emu.AtoB).DeliveredPackets + l.Stats(emu.BtoA).DeliveredPackets
	}
	for _, l := range r.tb.Net.Links() {
		a, b := l.Ends()
		up, down := emu.AtoB, emu.BtoA
		if a.Node == testbed.SwitchNode {
			a, b = b, a
			up, down = down, up
		}
		if b.Node != testbed.SwitchNode {
			continue
		}
		m.Links[a.Node] = LinkMeasure{ToSwitch: l.Stats(up), FromSwitch: l.Stats(down)}
	}
	if peers, err := (&Prepared{r: r}).Peers(); err == nil {
		byEnd := m.Links
		m.Links = make(map[string]LinkMeasure, len(peers))
		for _, pe := range peers {
			end := pe.Node
			if pe.CoLocated != nil {
				end = pe.CoLocated.NIC
			}
			if lm, ok := byEnd[end]; ok {
				m.Links[pe.Node] = lm
			}
		}
	}
	m.Workers = m.Workers[:0]
	for j, ws := range r.tb.Workers {
		for _, w := range ws {
			wm := WorkerMeasure{Job: r.plans[j].Name, Rank: w.Rank, Node: w.Name}
			for _, rep := range w.Endpoint.Reports() {
				wm.AllReduces = append(wm.AllReduces, Span{rep.Start, rep.End})
			}
			m.Workers = append(m.Workers, wm)
		}
	}
}
