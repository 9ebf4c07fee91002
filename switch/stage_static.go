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

// Contend lets the job's next use of a completed aggregator reclaim it: a
// later chunk (the chunk field is the job's sequence across all-reduces,
// compared with serial arithmetic). An earlier one is a replay or a stale
// retransmission and is refused: it cannot take back a slot a newer chunk
// completed.
func (Static) Contend(j *Job, tag Tag, cur Occupant) Verdict {
	if cur.Tag.Job() != j.ID {
		return Collide
	}
	if int32(tag.Chunk()-cur.Tag.Chunk()) < 0 {
		return Refuse
	}
	if cur.State == StateComplete {
		return Reclaim
	}
	return Collide
}

func (st Static) contribute(c contribution) { c.contend(st) }
