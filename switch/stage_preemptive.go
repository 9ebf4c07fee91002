package sw

// Preemptive is ESA's slot stage: hashed like ATP, but a contribution of a
// higher-priority job preempts a lower-priority partial aggregate, whose
// partial sum is sent to its own PS. Completed aggregators are reclaimable
// by anyone, and so, for a job with Job.ReclaimHeld, are aggregators held
// for the PS's ACK.
type Preemptive struct{}

func (Preemptive) Name() string { return "preemptive" }

func (Preemptive) Locate(j *Job, tag Tag) (int, bool) { return hashLocate(j, tag), true }

// Contend reclaims a completed aggregator (or, with j.ReclaimHeld, a held
// one) and preempts a claimed one of a lower-priority job.
func (Preemptive) Contend(j *Job, tag Tag, cur Occupant) Verdict {
	switch {
	case cur.State == StateComplete, cur.State == StateHeld && j.ReclaimHeld:
		return Reclaim
	case cur.State == StateClaimed && j.Priority > cur.Priority:
		return Preempt
	}
	return Collide
}

func (st Preemptive) contribute(c contribution) { c.contend(st) }
