package testbed

import (
	"github.com/inabox/inabox/host/baseline"
	sw "github.com/inabox/inabox/switch"
)

// esa: ESA's preemptive sharing: ATP's testbed (hashed shared pool, results
// through the PS), with the preemptive slot stage — a contribution of a
// higher-priority job evicts a lower-priority partial aggregate to its
// owner's PS — and each job's priority from its JobSpec; with
// Spec.ESAReclaimHeld a contribution also reclaims an aggregator held for
// another chunk's PS ACK.

func newESA() Policy { return newHashedBaseline("esa", sw.StagePreemptive, baseline.ESA) }
