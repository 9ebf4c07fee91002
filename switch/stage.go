package sw

import "github.com/inabox/inabox/switch/inahdr"

// SlotStage is a job's slot stage: it maps a chunk to its aggregator and
// decides what a worker's contribution does there (claim, add, absorb,
// complete, resend, collide, preempt), reading and writing the aggregator
// through the register helpers of aggregator.go.
//
// The job table's stage id (JobSpec.PolicyID) selects it. Static (SwitchML),
// Hashed (ATP) and Preemptive (ESA) are built in under StageStatic,
// StageHashed and StagePreemptive; they share one contention data path
// (stage_contend.go). A *FreeINA (all-reduce leases, FreeINA's trim and UC
// data paths) keeps per-switch state and is registered with RegisterStage
// under an id ≥ StageCustom.
//
// A stage runs on the hot path, once per INA packet, under the switch's
// lock: it must not allocate or block.
type SlotStage interface {
	// Name identifies the stage in reports.
	Name() string
	// Locate returns the head slot of the aggregator for chunk tag of job
	// j, or ok=false if the job has no memory for it. The head must lie in
	// j.Pool at Base + k·Stride for some k.
	Locate(j *Job, tag Tag) (head int, ok bool)
	// contribute decides worker contribution c.
	contribute(c contribution)
}

// contribute hands c to its job's stage: a built-in contention stage's
// rule straight to contend (Job.rule), without the stage's method wrapper.
func contribute(c contribution) {
	if r := c.m.from.job.rule; r != nil {
		c.contend(r)
		return
	}
	c.m.from.job.stage.contribute(c)
}

// contentionRule is st's rule if st is a built-in contention stage
// (Static, Hashed, Preemptive: their contribute is contend with it), else
// nil. These stages also locate purely: by the tag, the job's pool
// geometry and its budget alone (Job.pure).
func contentionRule(st SlotStage) contender {
	switch st := st.(type) {
	case Static:
		return st
	case Hashed:
		return st
	case Preemptive:
		return st
	}
	return nil
}

// contribution is one worker's INA packet at the slot stage: Process hands
// it to the job's stage.
type contribution struct {
	s *Switch
	m *pmeta
}

// fromPS handles a packet from the job's PS: a result (ATP ACK) releases
// the aggregator it was computed in and is multicast to the job's workers;
// anything else is plain traffic.
func (s *Switch) fromPS(f *Frame, m *pmeta) {
	j := m.from.job
	if !m.pkt.hdr.Has(inahdr.FlagResult) {
		s.forwardPlain(f, m)
		return
	}
	m.out.act, m.out.reason = ActMulticast, ReasonAck
	j.stats.Acks++
	s.release(j, m.from.tag)
}
