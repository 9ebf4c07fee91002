package testbed

import (
	"fmt"
	"math"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	sw "github.com/inabox/inabox/switch"
)

// FreeINA (docs/freeina.md): one pool over the switch memory, leased per
// all-reduce by the switch's FreeINA control plane (sw.FreeINAControl:
// ALLOC/GRANT/FREE from the PS); workers send INA chunks through the
// switch (PathUC: UC datagrams it absorbs; PathTrim: RC messages it trims)
// and the rest over RC to their PS (Testbed.PSOf).

// freeinaStage is the slot-stage id FreeINA's lease table is registered
// under.
const freeinaStage = sw.StageCustom

type freeinaPolicy struct {
	fi     *sw.FreeINA
	psJobs [][]host.PSJob
	pss    []*host.PS
	ws     [][]*host.Worker
	// control, if set, makes the switch's control plane over the lease
	// table p.fi (DynaINA); nil: FreeINA's.
	control func(t *Testbed) (leaseControl, error)
	// psHook, if set, adjusts each PS after it is made (DynaINA).
	psHook func(t *Testbed, ps *host.PS, cfg *host.PSConfig)
	name   string
}

// leaseControl is a switch control plane over FreeINA's lease table that
// answers ALLOCs with GRANTs (sw.FreeINAControl, sw.DynaINAControl).
type leaseControl interface {
	sw.ControlPlane
	AddJob(sw.FreeINAJob)
}

func newFreeINA() Policy { return &freeinaPolicy{name: "freeina"} }

func (p *freeinaPolicy) Name() string { return p.name }

func (p *freeinaPolicy) Switch(t *Testbed) (emu.Node, error) {
	aggs := t.aggregators()
	s, nc, err := t.newSwitch(aggs * t.Stride)
	if err != nil {
		return nil, err
	}
	if err := s.SetPool(1, 0, aggs*t.Stride, t.Stride); err != nil {
		return nil, err
	}
	p.fi, err = sw.NewFreeINA(s, sw.FreeINAConfig{PoolID: 1, LeaseIdle: t.Spec.Timers.LeaseIdle})
	if err != nil {
		return nil, err
	}
	if err := s.RegisterStage(freeinaStage, p.fi); err != nil {
		return nil, err
	}
	var ctl leaseControl = sw.NewFreeINAControl(p.fi)
	if p.control != nil {
		if ctl, err = p.control(t); err != nil {
			return nil, err
		}
	}
	uc := t.Spec.INAPath == host.PathUC
	nps := len(t.PSs)
	p.psJobs = make([][]host.PSJob, nps)
	for j, ws := range t.Workers {
		job := JobID(j)
		psi := t.PSOf(j)
		pj := host.PSJob{Job: job}
		var members []sw.McastMember
		for _, w := range ws {
			wa, rid := WorkerAddr(job, w.Rank), WorkerRID(job, w.Rank)
			if err := s.AddWorker(sw.WorkerEntry{Port: w.Port, QP: PSQPN(job, w.Rank), Job: job, Worker: uint8(w.Rank), RID: rid}); err != nil {
				return nil, err
			}
			if uc {
				if err := s.AddWorker(sw.WorkerEntry{Port: w.Port, QP: PSUCQPN(job, w.Rank), Job: job, Worker: uint8(w.Rank), RID: rid}); err != nil {
					return nil, err
				}
				pj.UCQPN = append(pj.UCQPN, PSUCQPN(job, w.Rank))
			}
			s.SetRewrite(rid, sw.Rewrite{SrcMAC: SwitchAddr.MAC, DstMAC: wa.MAC, SrcIP: SwitchAddr.IP, DstIP: wa.IP, DstQP: WorkerUCQPN(job, w.Rank)})
			members = append(members, sw.McastMember{RID: rid, Port: w.Port})
			pj.Workers = append(pj.Workers, host.Peer{Addr: wa, QPN: WorkerQPN(job, w.Rank)})
			pj.LocalQPN = append(pj.LocalQPN, PSQPN(job, w.Rank))
		}
		pa := PSAddr(psi)
		s.SetRewrite(PSRID(job), sw.Rewrite{SrcMAC: SwitchAddr.MAC, DstMAC: pa.MAC, SrcIP: SwitchAddr.IP, DstIP: pa.IP, DstQP: PSCtlQPN})
		if err := s.AddMcastGroup(job, members...); err != nil {
			return nil, err
		}
		if err := s.SetJob(sw.JobSpec{ID: job, Mask: uint32(1)<<len(ws) - 1, Group: job, PSPort: t.PSs[psi].Port,
			PolicyID: freeinaStage, PoolID: 1}); err != nil {
			return nil, err
		}
		ctl.AddJob(sw.FreeINAJob{Job: job, PSPort: t.PSs[psi].Port, PSRID: PSRID(job)})
		p.psJobs[psi] = append(p.psJobs[psi], pj)
	}
	nc.Control, nc.CtlQPN, nc.Addr = ctl, SwitchCtlQPN, SwitchAddr
	return sw.NewTimedNode(s, nc), nil
}

func (p *freeinaPolicy) PS(t *Testbed, i int) (emu.Node, error) {
	cfg := host.PSConfig{Addr: PSAddr(i), CtlQPN: PSCtlQPN, Switch: SwitchAddr, SwitchCtlQPN: SwitchCtlQPN, INAPath: t.Spec.INAPath,
		GrantTimeout: t.Spec.Timers.GrantTimeout, KeepAlive: KeepAlive(t.Spec.Timers.LeaseIdle)}
	// (with the configured latency as given: negative when untimed)
	cfg.Control.PipeSlots = PipeSlots(t.Spec.LinkBitsPerSecond, t.Spec.LinkDelay, t.Spec.Latency, t.Spec.ValuesPerPacket)
	cfg.Control.PSCapacity = psCapacity(&t.Spec)
	cfg.QP = t.rcQP()
	// The PS's requester sends plans, pulls and results: short bursts; a
	// small window keeps a go-back-N after reordering short.
	cfg.QP.MaxUnacked = 64
	if p.psHook != nil {
		p.psHook(t, nil, &cfg)
	}
	ps, err := host.NewPS(cfg, p.psJobs[i]...)
	if err != nil {
		return nil, err
	}
	if p.psHook != nil {
		p.psHook(t, ps, nil)
	}
	p.pss = append(p.pss, ps)
	return ps, nil
}

func (p *freeinaPolicy) Worker(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
	s := &t.Spec
	job := JobID(j)
	js := s.Jobs[j]
	psi := t.PSOf(j)
	wc := host.WorkerConfig{Job: job, Rank: uint8(r), Workers: js.Workers, Addr: WorkerAddr(job, r), Switch: SwitchAddr,
		PS: host.Peer{Addr: PSAddr(psi), QPN: PSQPN(job, r)}, QPN: WorkerQPN(job, r), UCQPN: WorkerUCQPN(job, r),
		Values: s.ValuesPerPacket, INAPath: s.INAPath, PSUCQPN: PSUCQPN(job, r), QP: t.rcQP(), Quant: s.Quant,
		WantSlots: s.WantSlots, ResultTimeout: s.Timers.ResultTimeout, AdaptUCTimeout: s.Realtime,
		Timeline: t.Timeline(j, r)}
	wc.Quant.Workers = js.Workers
	if s.FreeINA != nil && s.FreeINA.Worker != nil {
		s.FreeINA.Worker(j, r, &wc)
	}
	ucSet := wc.UCTimeout != 0
	if wc.UCTimeout == 0 && wc.INAPath == host.PathUC {
		wc.UCTimeout = UCTimeout(s.LinkBitsPerSecond, s.LinkDelay, t.latency(), s.ValuesPerPacket, wc.WantSlots)
	}
	if wc.UCRetries == 0 && wc.INAPath == host.PathUC && wc.QP.Timeout != 0 {
		wc.UCRetries = UCRetries(wc.UCTimeout, wc.QP.ACKTimeout())
	}
	if wc.UCMaxWait == 0 && wc.INAPath == host.PathUC {
		wc.UCMaxWait = UCMaxWait(wc.UCTimeout, s.Timers.LeaseIdle)
	}
	if wc.UCBeginWait == 0 && wc.INAPath == host.PathUC && wc.QP.Timeout != 0 {
		wc.UCBeginWait = t.ucBeginWait(wc, ucSet)
	}
	w, err := host.NewWorker(wc, ts...)
	if err != nil {
		return nil, err
	}
	for len(p.ws) <= j {
		p.ws = append(p.ws, nil)
	}
	p.ws[j] = append(p.ws[j], w)
	return w, nil
}

// Occupancy: the aggregators each lease holds.
func (p *freeinaPolicy) Occupancy(t *Testbed) []Occupied {
	var out []Occupied
	for _, l := range p.fi.Leases() {
		out = append(out, Occupied{Job: int(l.Job) - 1, Slots: l.Slots * t.Stride})
	}
	return out
}

func (p *freeinaPolicy) Counters(t *Testbed, job int) Counters {
	c := t.switchJobCounters(job)
	for _, w := range p.ws[job] {
		// RC retransmissions, plus UC contributions resent after a timeout
		// (the UC INA path's own loss recovery).
		c.Retransmissions += int64(w.QP().Stats().TxRetransmits)
		for _, r := range w.Reports() {
			c.Retransmissions += int64(r.Retransmits)
		}
	}
	return c
}

func (p *freeinaPolicy) Check(t *Testbed) error { return nil }

// lostState says why a FreeINA worker or PS that lost its state cannot
// rejoin the running job.
func (p *freeinaPolicy) lostState(role string) string {
	if role == "ps" {
		return p.name + " cannot recover a parameter server's all-reduces and RC connections mid-job; restart the jobs from a checkpoint"
	}
	return p.name + " cannot re-admit a worker mid-job: its RC connection to the PS and the results it had not received are gone; restart the job from a checkpoint"
}

// Failed: the PSs' and the workers' RC queue pairs, and RC posts refused.
func (p *freeinaPolicy) Failed(t *Testbed) error {
	for i, ps := range p.pss {
		for _, q := range ps.QPs() {
			if err := q.Err(); err != nil {
				c := q.Config()
				return fmt.Errorf("%s: RC QP %#x to %v QP %#x: %w", PSNode(i), c.QPN, c.Remote.IP, c.RemoteQPN, err)
			}
		}
		if n, err := ps.PostErr(); n > 0 {
			return fmt.Errorf("%s: %d RC messages could not be posted: %w", PSNode(i), n, err)
		}
	}
	for j, ws := range p.ws {
		for r, w := range ws {
			if err := w.QP().Err(); err != nil {
				c := w.QP().Config()
				return fmt.Errorf("%s: RC QP %#x to the PS (%v QP %#x): %w", WorkerNode(JobID(j), r), c.QPN, c.Remote.IP, c.RemoteQPN, err)
			}
			if n, err := w.PostErr(); n > 0 {
				return fmt.Errorf("%s: %d RC messages could not be posted: %w", WorkerNode(JobID(j), r), n, err)
			}
		}
	}
	return nil
}

// FreeINA returns the FreeINA lease table of a freeina or dynaina
// testbed, or nil.
func (t *Testbed) FreeINA() *sw.FreeINA {
	if p, ok := t.policy.(*freeinaPolicy); ok {
		return p.fi
	}
	if p, ok := t.policy.(*dynainaPolicy); ok {
		return p.fi
	}
	return nil
}

// FreeINAPS returns PS i of a freeina or dynaina testbed, or nil.
func (t *Testbed) FreeINAPS(i int) *host.PS {
	if ps, ok := t.PSs[i].Node.(*host.PS); ok {
		return ps
	}
	return nil
}

// FreeINAWorker returns worker rank of job of a freeina or dynaina
// testbed, or nil.
func (t *Testbed) FreeINAWorker(job, rank int) *host.Worker {
	w, _ := t.Workers[job][rank].Endpoint.(*host.Worker)
	return w
}

// ucBeginWait is the span of a worker's fallback before the first result
// (UCBeginWait) with the timeouts of the true-scale links: those of rate ÷
// RateScale and delay × RateScale, an unstretched RC ACK timeout and the
// true-scale lease idle time. A peer late by the same compute time then
// makes the same fallbacks at every scale. A UC timeout set for the worker
// (ucSet) is taken as given.
func (t *Testbed) ucBeginWait(wc host.WorkerConfig, ucSet bool) time.Duration {
	s := &t.Spec
	rs := s.RateScale
	if !(rs > 0 && rs < 1) {
		rs = 1
	}
	rate := int64(math.Round(float64(s.LinkBitsPerSecond) / rs))
	delay := time.Duration(math.Round(float64(s.LinkDelay) * rs))
	uc := UCTimeout(rate, delay, t.latency(), s.ValuesPerPacket, wc.WantSlots)
	if ucSet {
		uc = wc.UCTimeout
	}
	q := wc.QP
	q.TimeoutStretch = 0
	return UCBeginWait(uc, UCRetries(uc, q.ACKTimeout()), UCMaxWait(uc, ScaledTimers(rate, delay, 1).LeaseIdle))
}

// psCapacity is a PS's rate as a multiple of a worker link's, the path
// control's estimate of what the PS path can carry: chunks per second
// through its link, or through its CPU (every core on full chunks) where
// that is lower, over a worker link's chunks per second.
func psCapacity(s *Spec) float64 {
	wire := float64(ChunkWireBytes(s.ValuesPerPacket) * 8) // bits a chunk takes on a link
	rate := float64(s.PSLinkBitsPerSecond) / wire          // chunks/s
	if s.PSCPU.Enabled() {
		frame := ChunkWireBytes(s.ValuesPerPacket) - DefaultOverhead
		rate = min(rate, float64(s.PSCPU.Cores)/s.PSCPU.Service(frame).Seconds())
	}
	return rate / (float64(s.LinkBitsPerSecond) / wire)
}
