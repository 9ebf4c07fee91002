package run

import (
	"fmt"
	"math"
	"time"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/host"
)

// timedFault is a fault timed from an event (faults[i].when): sched
// schedules it, delay after the event.
type timedFault struct {
	i     int
	when  *scenario.When
	delay time.Duration
	sched func(at time.Duration) error
	fired bool
}

// watch observes the workers whose progress the timed faults wait for and
// schedules each fault once, delay after its event. Observing changes
// nothing the workers do, so a scenario's other outputs stay the same.
func (r *runner) watch(faults []timedFault) {
	jobs := map[string]int{}
	for i, p := range r.plans {
		jobs[p.Name] = i
	}
	total := 0 // every job's all-reduces, for run_fraction
	for _, p := range r.plans {
		total += p.AllReduces()
	}
	ended := 0
	fire := func(tf *timedFault) {
		if tf.fired {
			return
		}
		tf.fired = true
		if err := tf.sched(r.tb.Net.Now() + tf.delay); err != nil && r.fatal == nil {
			r.fatal = fmt.Errorf("faults[%d] (after %s): %w", tf.i, tf.when, err)
		}
	}
	// byWorker[job][rank] are the faults that worker's steps may fire.
	byWorker := make([][][]*timedFault, len(r.plans))
	var runWide []*timedFault
	for k := range faults {
		tf := &faults[k]
		w := tf.when
		if w.Form() == scenario.WhenRunFraction {
			runWide = append(runWide, tf)
			continue
		}
		j := jobs[w.Job]
		if byWorker[j] == nil {
			byWorker[j] = make([][]*timedFault, r.plans[j].Workers)
		}
		ranks := []int{0}
		if w.Form() == scenario.WhenFirstPacket {
			ranks = ranks[:0]
			for rk := range r.plans[j].Workers {
				ranks = append(ranks, rk)
			}
		}
		for _, rk := range ranks {
			byWorker[j][rk] = append(byWorker[j][rk], tf)
		}
	}
	for j, p := range r.plans {
		buckets := len(p.Buckets)
		for rk := range p.Workers {
			mine := byWorker[j]
			var fs []*timedFault
			if mine != nil {
				fs = mine[rk]
			}
			if len(fs) == 0 && (rk != 0 || len(runWide) == 0) {
				continue
			}
			stored := map[int]uint32{} // chunks stored per all-reduce
			counts := rk == 0 && len(runWide) > 0
			r.tb.Worker(j, rk).Endpoint.Observe(func(st host.Step) {
				if st.Kind == host.StepChunk {
					stored[st.Index]++
				}
				for _, tf := range fs {
					if tf.fired {
						continue
					}
					w := tf.when
					switch w.Form() {
					case scenario.WhenFirstPacket:
						if st.Kind == host.StepBegin && st.Index == 0 {
							fire(tf)
						}
					case scenario.WhenIteration:
						if st.Kind == host.StepBegin && st.Index == w.Iteration*buckets {
							fire(tf)
						}
					case scenario.WhenAllReduce:
						if st.Index != w.AllReduce {
							continue
						}
						switch {
						case w.Fraction == 0:
							if st.Kind == host.StepBegin {
								fire(tf)
							}
						case st.Kind == host.StepChunk:
							if stored[st.Index] >= max(uint32(math.Ceil(w.Fraction*float64(st.Chunks))), 1) {
								fire(tf)
							}
						case st.Kind == host.StepEnd:
							fire(tf) // every chunk is in: the fraction is reached
						}
					}
				}
				if st.Kind == host.StepEnd {
					delete(stored, st.Index)
				}
				if counts && st.Kind == host.StepEnd {
					ended++
					for _, tf := range runWide {
						if float64(ended) >= math.Ceil(tf.when.RunFraction*float64(total)) {
							fire(tf)
						}
					}
				}
			})
		}
	}
}
