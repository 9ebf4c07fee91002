package sw

import (
	"fmt"
	"slices"
	"time"

	"github.com/inabox/inabox/switch/inahdr"
)

// SwitchML's controller (docs/baselines.md, "SwitchML's admission").
//
// SwitchML partitions switch memory statically: a job gets a pool when it
// starts and keeps it, unchanged, until it ends (its controller programs
// the switch at job set-up and never resizes a running job). Memory is
// divided among the jobs present, not among every job that will ever run:
//
//   - The cluster manager tells the controller of each job's arrival
//     (Arrive); the job is present from then until every worker has left.
//     A JOIN from a job not announced so announces it.
//   - A job's workers JOIN when the job starts, asking for Want
//     aggregators (two windows: the pool's halves are SwitchML's shadow
//     copies). Jobs that joined are admitted in arrival order with
//     min(Want, max(total ÷ jobs present, MinAggregators)) aggregators,
//     rounded down to even and to the largest free run; the job entry and
//     pool are installed (the static slot stage) and a GRANT goes to the
//     workers.
//   - A job that finds less than MinAggregators free waits (and so does
//     every job after it: first come, first served) until a job leaves.
//   - Each worker LEAVEs when it has finished; when every worker has left,
//     the pool is cleared and released, the job entry removed, LEFT sent
//     to the workers, and waiting jobs are admitted.
//
// Workers repeat JOIN and LEAVE until answered (GRANT, LEFT), so both are
// idempotent. The controller is not on the switch's CPU in SwitchML: a
// switch reboot loses registers, not what the controller installed, so
// Reset keeps every pool.

// SwitchMLConfig configures SwitchML's controller.
type SwitchMLConfig struct {
	// Base and Slots are the switch memory the controller partitions:
	// slots [Base, Base+Slots); Stride is the slots per aggregator.
	Base, Slots, Stride int
	// MinAggregators is the smallest pool a job is admitted with; 0 means
	// SwitchMLMinAggregators. The memory must hold at least that many.
	MinAggregators int
}

// SwitchMLMinAggregators is the smallest pool SwitchML admits a job with
// by default: a window of one chunk and its shadow copy.
const SwitchMLMinAggregators = 2

// SwitchMLJob is a job the controller may admit: its job entry (installed
// on admission with the granted pool: PoolID and PolicyID are the
// controller's) and its number of workers, each of which must LEAVE.
type SwitchMLJob struct {
	Spec    JobSpec
	Workers int
}

// SwitchMLPool is a job's granted pool: Aggregators aggregators from slot
// Base on.
type SwitchMLPool struct {
	Job               uint16
	Base, Aggregators int
	Granted           time.Duration
}

// SwitchMLStats are the controller's counters.
type SwitchMLStats struct {
	// Joins and Leaves count the messages handled; Admitted the jobs
	// granted a pool, Waited those of them that waited for memory first,
	// Released the pools released after every worker left.
	Joins, Leaves, Admitted, Waited, Released uint64
	// Unknown counts JOIN and LEAVE messages of jobs not registered or of
	// ranks the job lacks.
	Unknown uint64
	// Wait is the time admitted jobs spent between their first JOIN and
	// their admission, summed over jobs; WaitMax the longest.
	Wait, WaitMax time.Duration
}

// SwitchMLControl is SwitchML's controller as a switch control plane. Its
// methods run on the emulator's goroutine (node callbacks) or before the
// run.
type SwitchMLControl struct {
	s     *Switch
	cfg   SwitchMLConfig
	used  []bool // per aggregator
	jobs  map[uint16]*smlJob
	queue []uint16 // jobs that joined and wait for memory, in arrival order
	seq   int      // arrivals so far
	stats SwitchMLStats
	err   error
}

type smlState uint8

const (
	smlIdle     smlState = iota // not arrived
	smlArrived                  // present, not joined yet
	smlWaiting                  // joined, waiting for memory
	smlAdmitted                 // holds a pool
	smlGone                     // every worker left; pool released
)

type smlJob struct {
	spec    SwitchMLJob
	state   smlState
	want    int // aggregators asked for
	pool    SwitchMLPool
	left    uint32 // ranks that left
	waiting bool   // had to wait
	joined  time.Duration
	arrival int // arrival order
}

var _ ControlPlane = (*SwitchMLControl)(nil)

// NewSwitchMLControl returns SwitchML's controller over s's memory
// cfg.Base … cfg.Base+cfg.Slots.
func NewSwitchMLControl(s *Switch, cfg SwitchMLConfig) (*SwitchMLControl, error) {
	if cfg.Stride <= 0 {
		cfg.Stride = 1
	}
	if cfg.MinAggregators <= 0 {
		cfg.MinAggregators = SwitchMLMinAggregators
	}
	if cfg.Base < 0 || cfg.Slots < cfg.Stride || cfg.Base+cfg.Slots > s.Config().Slots {
		return nil, fmt.Errorf("%w: SwitchML memory [%d,+%d) stride %d", ErrPoolRange, cfg.Base, cfg.Slots, cfg.Stride)
	}
	if n := cfg.Slots / cfg.Stride; n < cfg.MinAggregators {
		// No job could ever be admitted: its workers would wait forever.
		return nil, fmt.Errorf("%w: SwitchML memory of %d aggregators, fewer than the smallest pool a job is admitted with (%d)",
			ErrPoolRange, n, cfg.MinAggregators)
	}
	return &SwitchMLControl{s: s, cfg: cfg, used: make([]bool, cfg.Slots/cfg.Stride), jobs: map[uint16]*smlJob{}}, nil
}

// AddJob registers a job the controller may admit.
func (sc *SwitchMLControl) AddJob(j SwitchMLJob) error {
	if j.Spec.ID == 0 {
		return ErrJobID
	}
	if j.Workers <= 0 || j.Workers > 32 {
		return fmt.Errorf("%w: job %d has %d workers", ErrWorkerID, j.Spec.ID, j.Workers)
	}
	sc.jobs[j.Spec.ID] = &smlJob{spec: j}
	return nil
}

// Arrive is the cluster manager's word that job arrived at now: it is
// present, and counts in every share, from now until every worker has
// left. A job not registered is an error; a second arrival is ignored.
func (sc *SwitchMLControl) Arrive(now time.Duration, job uint16) error {
	j := sc.jobs[job]
	if j == nil {
		return fmt.Errorf("%w: %d", ErrNoJob, job)
	}
	sc.arrive(j)
	return nil
}

func (sc *SwitchMLControl) arrive(j *smlJob) {
	if j.state == smlIdle {
		j.state, j.arrival = smlArrived, sc.seq
		sc.seq++
	}
}

// Aggregators returns the number of aggregators the controller divides.
func (sc *SwitchMLControl) Aggregators() int { return len(sc.used) }

// Pools returns the pools granted now, by job.
func (sc *SwitchMLControl) Pools() []SwitchMLPool {
	var out []SwitchMLPool
	for _, j := range sc.jobs {
		if j.state == smlAdmitted {
			out = append(out, j.pool)
		}
	}
	slices.SortFunc(out, func(a, b SwitchMLPool) int { return int(a.Job) - int(b.Job) })
	return out
}

// Waiting returns the jobs waiting for memory, in the order they will be
// admitted.
func (sc *SwitchMLControl) Waiting() []uint16 { return slices.Clone(sc.queue) }

// Stats returns the controller's counters.
func (sc *SwitchMLControl) Stats() SwitchMLStats { return sc.stats }

// Err returns the first error installing a pool (a configuration the
// switch refused), or nil.
func (sc *SwitchMLControl) Err() error { return sc.err }

// Start implements ControlPlane.
func (sc *SwitchMLControl) Start(c *CtlEnv) {}

// Frames implements ControlPlane.
func (sc *SwitchMLControl) Frames(c *CtlEnv) {}

// Timer implements ControlPlane (no timers).
func (sc *SwitchMLControl) Timer(c *CtlEnv, key uint64) {}

// Settle implements ControlPlane.
func (sc *SwitchMLControl) Settle(c *CtlEnv) {}

// Reset implements ControlPlane: the controller is off the switch; the
// pools it installed stay (the node keeps the tables).
func (sc *SwitchMLControl) Reset() {}

// Control implements ControlPlane: JOIN and LEAVE.
func (sc *SwitchMLControl) Control(c *CtlEnv, port int, m inahdr.Ctl) {
	j := sc.jobs[m.Job]
	if (m.Op == inahdr.CtlJoin || m.Op == inahdr.CtlLeave) && (j == nil || m.Rank >= j.spec.Workers) {
		sc.stats.Unknown++
		return
	}
	switch m.Op {
	case inahdr.CtlJoin:
		sc.stats.Joins++
		sc.arrive(j)
		switch j.state {
		case smlArrived:
			j.state, j.want, j.joined = smlWaiting, max(m.Want, sc.cfg.MinAggregators), c.Now()
			// In arrival order among the jobs that joined.
			i := len(sc.queue)
			for i > 0 && sc.jobs[sc.queue[i-1]].arrival > j.arrival {
				i--
			}
			sc.queue = slices.Insert(sc.queue, i, m.Job)
			sc.admit(c)
			if j.state == smlWaiting {
				j.waiting = true
			}
		case smlAdmitted:
			sc.grant(c, j)
		case smlGone:
			c.SendGroup(j.spec.Spec.Group, inahdr.Ctl{Op: inahdr.CtlLeft, Job: m.Job})
		}
	case inahdr.CtlLeave:
		sc.stats.Leaves++
		switch j.state {
		case smlAdmitted:
			j.left |= 1 << m.Rank
			if j.left == uint32(1)<<j.spec.Workers-1 {
				sc.release(c, j)
				sc.admit(c)
			}
		case smlGone:
			c.SendGroup(j.spec.Spec.Group, inahdr.Ctl{Op: inahdr.CtlLeft, Job: m.Job})
		}
	}
}

func (sc *SwitchMLControl) grant(c *CtlEnv, j *smlJob) {
	c.SendGroup(j.spec.Spec.Group, inahdr.Ctl{Op: inahdr.CtlGrant, Job: j.spec.Spec.ID, Base: j.pool.Base, Slots: j.pool.Aggregators})
}

// admit admits waiting jobs in arrival order while memory allows.
func (sc *SwitchMLControl) admit(c *CtlEnv) {
	for len(sc.queue) > 0 {
		j := sc.jobs[sc.queue[0]]
		present := 0 // arrived and not gone, this job included
		for _, o := range sc.jobs {
			if o.state == smlArrived || o.state == smlWaiting || o.state == smlAdmitted {
				present++
			}
		}
		// The job's share, but never less than the smallest pool: with
		// more jobs present than pools fit, the first ones run while the
		// others wait.
		n := min(j.want, max(len(sc.used)/present, sc.cfg.MinAggregators))
		at, run := firstFit(sc.used, n)
		n = run &^ 1
		if n < sc.cfg.MinAggregators {
			return
		}
		for k := at; k < at+n; k++ {
			sc.used[k] = true
		}
		base := sc.cfg.Base + at*sc.cfg.Stride
		spec := j.spec.Spec
		spec.PoolID, spec.PolicyID = spec.ID, StageStatic
		if err := sc.s.SetPool(spec.ID, base, n*sc.cfg.Stride, sc.cfg.Stride); err != nil {
			sc.fail(err)
			return
		}
		if err := sc.s.SetJob(spec); err != nil {
			sc.fail(err)
			return
		}
		sc.queue = sc.queue[1:]
		j.state = smlAdmitted
		j.pool = SwitchMLPool{Job: spec.ID, Base: base, Aggregators: n, Granted: c.Now()}
		sc.stats.Admitted++
		if j.waiting {
			sc.stats.Waited++
		}
		w := c.Now() - j.joined
		sc.stats.Wait += w
		sc.stats.WaitMax = max(sc.stats.WaitMax, w)
		sc.grant(c, j)
	}
}

// release clears and frees job j's pool and removes its job entry: every
// worker has left.
func (sc *SwitchMLControl) release(c *CtlEnv, j *smlJob) {
	p := j.pool
	sc.s.RemoveJob(p.Job)
	sc.s.ResetSlots(p.Base, p.Aggregators*sc.cfg.Stride)
	at := (p.Base - sc.cfg.Base) / sc.cfg.Stride
	for k := at; k < at+p.Aggregators; k++ {
		sc.used[k] = false
	}
	j.state = smlGone
	sc.stats.Released++
	c.SendGroup(j.spec.Spec.Group, inahdr.Ctl{Op: inahdr.CtlLeft, Job: p.Job})
}

func (sc *SwitchMLControl) fail(err error) {
	if sc.err == nil {
		sc.err = err
	}
}
