package testbed

import (
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
)

// none: no INA. Every job all-reduces with a host ring (reduce-scatter then
// all-gather, NCCL's default) over RC QPs to its neighbours; the switch is
// a plain L2 switch and the PS node idles.

func newRing() Policy {
	return &baselinePolicy{name: "none", worker: ringWorker}
}

func ringWorker(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
	job, n := JobID(j), t.Spec.Jobs[j].Workers
	right, left := (r+1)%n, (r+n-1)%n
	return baseline.NewRingWorker(baseline.RingConfig{RCConfig: t.rcConfig(j, r),
		RightQPN: RingRightQPN(job, r), LeftQPN: RingLeftQPN(job, r),
		Right: host.Peer{Addr: WorkerAddr(job, right), QPN: RingLeftQPN(job, right)},
		Left:  host.Peer{Addr: WorkerAddr(job, left), QPN: RingRightQPN(job, left)}}, ts)
}
