package testbed

import (
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
)

// none: no INA. Every job all-reduces with a host ring (reduce-scatter then
// all-gather, NCCL's default) over RC QPs to its neighbours; the switch is
// a plain L2 switch and the PS node idles. Each QP's PSN window covers its
// round trip (RingWindow), so the ring runs at its wire bound.

func newRing() Policy {
	return &baselinePolicy{name: "none", worker: ringWorker}
}

func ringWorker(t *Testbed, j, r int, ts []host.Tensor) (Worker, error) {
	job, n := JobID(j), t.Spec.Jobs[j].Workers
	right, left := (r+1)%n, (r+n-1)%n
	rc := t.rcConfig(j, r)
	if t.Spec.QP.MTU == 0 {
		rc.QP.MaxUnacked = RingWindow(t.Spec.LinkBitsPerSecond, t.Spec.LinkDelay, t.latency(), t.Spec.ValuesPerPacket)
	}
	return baseline.NewRingWorker(baseline.RingConfig{RCConfig: rc,
		RightQPN: RingRightQPN(job, r), LeftQPN: RingLeftQPN(job, r),
		Right: host.Peer{Addr: WorkerAddr(job, right), QPN: RingLeftQPN(job, right)},
		Left:  host.Peer{Addr: WorkerAddr(job, left), QPN: RingRightQPN(job, left)}}, ts)
}
