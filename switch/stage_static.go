package sw

// Static is SwitchML's slot stage: each job owns a fixed slot range (its
// pool) and chunk c uses aggregator c mod Aggregators(). Hosts keep at most
// half the pool in flight, so the two halves act as SwitchML's shadow sets:
// a completed aggregator keeps its result (for retransmissions) until the
// chunk one pool-length later reclaims it.
type Static struct{}

func (Static) Name() string { return "static" }

func (Static) Locate(j *Job, tag Tag) (int, bool) {
	p := j.Pool
	n := uint32(p.Slots / p.Stride)
	return p.Base + int(tag.Chunk()%n)*p.Stride, true
}

// Contend lets the job's next use of a completed aggregator reclaim it.
func (Static) Contend(j *Job, cur Occupant) Verdict {
	if cur.State == StateComplete && cur.Tag.Job() == j.ID {
		return Reclaim
	}
	return Collide
}

func (st Static) contribute(c contribution) { c.contend(st) }
