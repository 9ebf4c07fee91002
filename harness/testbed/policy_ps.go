package testbed

import (
	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
	"github.com/inabox/inabox/rdma"
)

// PS-only: no INA. Every worker pushes each chunk to the parameter server
// over its own RC QP (FlagBypass: the switch forwards it by L2); the PS
// sums each chunk in software and sends the sum back over RC. Not a
// scenario policy (yet): build it with BuildWith(spec, PSOnly(), …).

// PSOnly returns the PS-only baseline.
func PSOnly() Policy {
	p := &baselinePolicy{name: "ps"}
	p.worker = func(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
		job := JobID(j)
		win := t.Spec.Window
		if win == 0 {
			win = 256
		}
		cfg := baseline.PSOnlyConfig{RCConfig: t.rcConfig(j, r), QPN: WorkerQPN(job, r),
			PS: host.Peer{Addr: PSAddr(t.PSOf(j)), QPN: PSQPN(job, r)}, Window: win}
		cfg.QP = psOnlyQP(t)
		return baseline.NewPSOnlyWorker(cfg, ts)
	}
	p.ps = func(t *Testbed, i int) (emu.Node, error) {
		var jobs []host.PSJob
		for _, j := range t.jobsOf(i) {
			job := JobID(j)
			pj := host.PSJob{Job: job}
			for r := 0; r < t.Spec.Jobs[j].Workers; r++ {
				pj.Workers = append(pj.Workers, host.Peer{Addr: WorkerAddr(job, r), QPN: WorkerQPN(job, r)})
				pj.LocalQPN = append(pj.LocalQPN, PSQPN(job, r))
			}
			jobs = append(jobs, pj)
		}
		return baseline.NewPSOnlyServer(psOnlyQP(t), PSAddr(i), jobs...)
	}
	return p
}

// psOnlyQP is the PS-only QP template: the testbed's, with (unless Spec.QP
// is set) a PSN window of each QP's share of the PS link's round trip. Every
// worker's QP (and the PS's QP back to it) shares the PS link, so together
// they need only its round-trip bandwidth-delay product in flight —
// PipeSlots, twice a worker↔switch round trip, is one worker↔PS round trip —
// and each QP gets its share. A larger window only queues at the PS port,
// and every go-back-N after a reordering or a loss resends the whole window
// into that queue (8 workers, 4 MB, 2 % reordering: 42 ms with 128 PSNs and
// 631 k queue drops, 10.9 ms with 22; clean 4.66 ms with either).
func psOnlyQP(t *Testbed) rdma.Config {
	q := t.rcQP()
	if t.Spec.QP.MTU != 0 {
		return q
	}
	n := 0
	for _, js := range t.Spec.Jobs {
		n += js.Workers
	}
	s := &t.Spec
	share := PipeSlots(s.PSLinkBitsPerSecond, s.LinkDelay, t.latency(), s.ValuesPerPacket)
	q.MaxUnacked = min(q.MaxUnacked, max(4, (share+n-1)/max(n, 1)))
	return q
}
