package testbed

import (
	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
)

// Drops count the frames dropped on the way, by cause: where a frame
// damaged, forged or stale was caught.
type Drops struct {
	// FCS: corrupted on a link, dropped by the receiving port's MAC.
	FCS uint64 `json:"fcs"`
	// BadICRC: damaged past the FCS, caught by an ICRC check (the switch's,
	// before any register, or a host's).
	BadICRC uint64 `json:"bad_icrc"`
	// Foreign: an INA packet from a port, QP or worker id not the job's.
	Foreign uint64 `json:"foreign"`
	// Spoofed: from a source MAC or IPv4 address not its port's.
	Spoofed uint64 `json:"spoofed_source"`
	// ForgedResult: a result not from the switch or the job's PS, or a
	// frame on an RC connection not from its peer.
	ForgedResult uint64 `json:"forged_result"`
	// ForgedControl: a GRANT not from the switch, an ALLOC or FREE not from
	// the job's PS.
	ForgedControl uint64 `json:"forged_control"`
	// Stale: a contribution to an all-reduce or chunk older than the job's
	// window, or older than its aggregator's owner.
	Stale uint64 `json:"stale"`
	// Malformed: a bad header, bitmap, chunk out of range, or too long.
	Malformed uint64 `json:"malformed"`
	// CPUQueue: arrived at a PS whose CPU queue was full, or lost in its
	// CPU at a crash (Spec.PSCPU).
	CPUQueue uint64 `json:"cpu_queue,omitempty"`
}

// Total is the number of drops of all causes.
func (d Drops) Total() uint64 {
	return d.FCS + d.BadICRC + d.Foreign + d.Spoofed + d.ForgedResult + d.ForgedControl + d.Stale + d.Malformed + d.CPUQueue
}

// Add returns d + o.
func (d Drops) Add(o Drops) Drops {
	return Drops{FCS: d.FCS + o.FCS, BadICRC: d.BadICRC + o.BadICRC, Foreign: d.Foreign + o.Foreign,
		Spoofed: d.Spoofed + o.Spoofed, ForgedResult: d.ForgedResult + o.ForgedResult,
		ForgedControl: d.ForgedControl + o.ForgedControl, Stale: d.Stale + o.Stale, Malformed: d.Malformed + o.Malformed,
		CPUQueue: d.CPUQueue + o.CPUQueue}
}

// rxer is an endpoint that counts its drops (host.Core and the PSs).
type rxer interface{ Rx() host.RxStats }

// qper is an endpoint with RC QPs.
type qper interface{ QPs() []*rdma.QP }

// endpointDrops are the drops endpoint n counted itself and in its QPs;
// stale frames count for a PS (a contribution to an all-reduce it has
// finished), not for a worker (a late copy of a result it holds is no
// drop worth reporting).
func endpointDrops(n any, ps bool) Drops {
	var d Drops
	if r, ok := n.(rxer); ok {
		rx := r.Rx()
		d.BadICRC += rx.BadICRC
		d.ForgedResult += rx.Forged
		d.Malformed += rx.Malformed
		if ps {
			d.Stale += rx.Stale
		}
	}
	if q, ok := n.(qper); ok {
		for _, qp := range q.QPs() {
			st := qp.Stats()
			d.BadICRC += st.RxBadICRC
			d.ForgedResult += st.RxWrongSource
		}
	}
	return d
}

// linkFCS is the FCS drops of both directions of l.
func linkFCS(l *emu.Link) uint64 {
	if l == nil {
		return 0
	}
	return l.Stats(emu.AtoB).Drops.FCS + l.Stats(emu.BtoA).Drops.FCS
}

// JobDrops are the drops attributable to job: on its workers' links, by
// its workers, and by the switch for packets that claimed the job.
func (t *Testbed) JobDrops(job int) Drops {
	var d Drops
	for _, w := range t.Workers[job] {
		d.FCS += linkFCS(w.Link)
		d = d.Add(endpointDrops(w.Endpoint, false))
	}
	if st, ok := t.Switch.JobStats(JobID(job)); ok {
		d.BadICRC += st.BadICRC
		d.Foreign += st.Foreign
		d.ForgedResult += st.ForgedResult
		d.Stale += st.Stale
		d.Malformed += st.BadBitmap + st.OutOfRange
	}
	return d
}

// Drops are every drop of the run, whoever the frame claimed to be.
func (t *Testbed) Drops() Drops {
	var d Drops
	for _, l := range t.Net.Links() {
		d.FCS += linkFCS(l)
	}
	for _, ps := range t.PSs {
		d = d.Add(endpointDrops(ps.Node, true))
		if ps.CPU != nil {
			st := ps.CPU.Stats()
			d.CPUQueue += st.Dropped + st.Lost
		}
	}
	for _, ws := range t.Workers {
		for _, w := range ws {
			d = d.Add(endpointDrops(w.Endpoint, false))
		}
	}
	by := t.Switch.Stats().ByReason
	d.BadICRC += by[sw.ReasonBadICRC]
	d.Foreign += by[sw.ReasonForeign] + by[sw.ReasonNoJob]
	d.Spoofed += by[sw.ReasonSpoofed]
	d.ForgedResult += by[sw.ReasonForgedResult]
	d.ForgedControl += by[sw.ReasonForgedControl]
	d.Stale += by[sw.ReasonStale]
	d.Malformed += by[sw.ReasonMalformed] + by[sw.ReasonTooLong] + by[sw.ReasonBadBitmap] + by[sw.ReasonOutOfRange]
	if n, ok := t.SwitchNode.(*sw.Node); ok {
		ns := n.Stats()
		d.BadICRC += ns.CtlBadICRC
		d.Malformed += ns.CtlMalformed
		d.ForgedControl += ns.CtlForeign
	}
	return d
}
