package up

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/up/faultctl"
)

// A scenario fault, in `inabox up`, is a few steps: calls on the fault
// API of the processes that model the link it targets, or signals to the
// processes of the nodes it targets. faultSteps maps one fault to its
// steps; the session fires them at their wall-clock times (the run's
// time 0 plus the fault's time plus the step's offset).

// procAct is what a step does to processes.
type procAct int

const (
	actKill    procAct = iota // SIGKILL: state lost
	actRestart                // the replacement process runs (--restarted: state lost, the run's clock)
	actStop                   // SIGSTOP: paused with its state
	actCont                   // SIGCONT: resumes (emu Resume)
)

func (a procAct) String() string {
	return [...]string{"kill", "restart", "stop", "cont"}[a]
}

// linkCall is one fault API call on every process modelling a link's
// direction(s).
type linkCall func(ctx context.Context, c *faultctl.Client, link, dir string) ([]faultctl.DirState, error)

// step is one action of a fault, after its offset from the fault's time.
type step struct {
	after time.Duration
	what  string // for the record
	// One of: a link call on link's dir, a process action on nodes, or
	// fatal (the run cannot go on: the emulator stops it there too).
	link, dir string
	call      linkCall
	nodes     []string
	act       procAct
	// respawn (actKill): start the replacement process at once, to run
	// from restartAfter on (the crash's end).
	respawn      bool
	restartAfter time.Duration
	fatal        func(at time.Duration) error // at: when it fires, since time 0
}

// topology is what faultSteps needs to know of the run.
type topology interface {
	// nodesOn returns the nodes on a host or PS (a crash's target).
	nodesOn(target string) []string
	// idle reports whether a node does nothing the jobs need.
	idle(node string) bool
	// rateScale is the scenario's scaling.rate_scale (a rate_change's value
	// is before it).
	rateScale() float64
	// link returns the link the processes' fault APIs name target by: a
	// co-located PS's link ("ps0") is its host's; any other is target.
	link(target string) string
}

// switchProc names the switch process (and the switch in steps).
const switchProc = "switch"

func window(kind string, value float64, delay, dur time.Duration) linkCall {
	w := faultctl.Window{Kind: kind, Value: value, Delay: faultctl.Duration(delay), Duration: faultctl.Duration(dur)}
	return func(ctx context.Context, c *faultctl.Client, link, dir string) ([]faultctl.DirState, error) {
		return c.Open(ctx, link, dir, w)
	}
}

func linkUp(up bool, dur time.Duration) linkCall {
	return func(ctx context.Context, c *faultctl.Client, link, dir string) ([]faultctl.DirState, error) {
		return c.SetUp(ctx, link, dir, up, dur)
	}
}

func config(p faultctl.ConfigPatch) linkCall {
	return func(ctx context.Context, c *faultctl.Client, link, dir string) ([]faultctl.DirState, error) {
		return c.SetConfig(ctx, link, dir, p)
	}
}

// faultSteps maps fault i of the scenario to its steps. Link faults act on
// the directions the fault names (both by default) of the target's links,
// each in the process that models it; a window (a burst, a rate or MTU
// change for a while) is timed by the processes themselves and reverts on
// its own, on top of the link's configuration.
func faultSteps(i int, f scenario.Fault, topo topology) ([]step, error) {
	dur := f.Duration.D()
	dir := f.Direction
	if dir == "" {
		dir = faultctl.Both
	}
	target := f.Target
	if dir != faultctl.Both {
		target += " (" + dir + ")"
	}
	on := func(what string, c linkCall) []step {
		return []step{{what: what, link: topo.link(f.Target), dir: dir, call: c}}
	}
	burst := func(kind string) []step {
		return on(fmt.Sprintf("%s %g on %s for %v", kind, f.Value, target, dur), window(kind, f.Value, 0, dur))
	}
	us := time.Duration(f.Value * float64(time.Microsecond))
	switch f.Kind {
	case scenario.FaultLinkDown:
		what := fmt.Sprintf("%s down", target)
		if dur > 0 {
			what += fmt.Sprintf(" for %v", dur)
		}
		return on(what, linkUp(false, dur)), nil
	case scenario.FaultLinkUp:
		return on(target+" up", linkUp(true, 0)), nil
	case scenario.FaultLossBurst:
		return burst(faultctl.WinLoss), nil
	case scenario.FaultDupBurst:
		return burst(faultctl.WinDuplicate), nil
	case scenario.FaultReorderBurst:
		return burst(faultctl.WinReorder), nil
	case scenario.FaultCorrupt:
		return burst(faultctl.WinCorrupt), nil
	case scenario.FaultCorruptUndetected:
		return burst(faultctl.WinCorruptUndetected), nil
	case scenario.FaultDelaySpike:
		return on(fmt.Sprintf("delay +%v on %s for %v", us, target, dur), window(faultctl.WinDelay, 0, us, dur)), nil
	case scenario.FaultJitterBurst:
		return on(fmt.Sprintf("jitter +%v on %s for %v", us, target, dur), window(faultctl.WinJitter, 0, us, dur)), nil
	case scenario.FaultRateChange:
		gbps := f.Value * topo.rateScale() // the value is before rate_scale, as link_gbps
		if dur > 0 {
			return on(fmt.Sprintf("rate %g Gb/s on %s for %v", gbps, target, dur), window(faultctl.WinRate, gbps, 0, dur)), nil
		}
		return on(fmt.Sprintf("rate %g Gb/s on %s", gbps, target), config(faultctl.ConfigPatch{RateGbps: &gbps})), nil
	case scenario.FaultMTUChange:
		mtu := int(f.Value)
		if dur > 0 {
			return on(fmt.Sprintf("mtu %d on %s for %v", mtu, target, dur), window(faultctl.WinMTU, f.Value, 0, dur)), nil
		}
		return on(fmt.Sprintf("mtu %d on %s", mtu, target), config(faultctl.ConfigPatch{MTU: &mtu})), nil
	case scenario.FaultSwitchReboot:
		return crashSteps([]string{switchProc}, dur, true, topo), nil
	case scenario.FaultSwitchCrash:
		// The emulator's words (harness/run: faultAt).
		return []step{{what: "kill switch", nodes: []string{switchProc}, act: actKill},
			{what: "fatal", fatal: func(at time.Duration) error {
				return fmt.Errorf("the switch crashed at %v and does not restart (faults[%d]): no job can finish", at, i)
			}}}, nil
	case scenario.FaultNodeCrash:
		if h := topo.link(f.Target); h != f.Target {
			return nil, fmt.Errorf("node_crash on %s: a co-located PS runs in its host %s's process, and inabox up stops whole processes: crash %s (its worker and PS), or run the scenario in virtual time", f.Target, h, h)
		}
		nodes := topo.nodesOn(f.Target)
		if len(nodes) == 0 {
			return nil, fmt.Errorf("node_crash: no process runs a node of %q", f.Target)
		}
		return crashSteps(nodes, dur, f.LoseState, topo), nil
	}
	return nil, fmt.Errorf("fault kind %q: inabox up cannot inject it (kinds: %s)", f.Kind, strings.Join(scenario.FaultKinds, ", "))
}

// crashSteps crashes the processes of nodes: with loseState SIGKILL and a
// new process dur later (its state lost), without SIGSTOP and SIGCONT dur
// later (emu Resume). A crash without a restart (dur 0) stops the run, as
// in the emulator, unless every node is idle; a switch reboot of 0
// restarts at once.
func crashSteps(nodes []string, dur time.Duration, loseState bool, topo topology) []step {
	names := strings.Join(nodes, ", ")
	down, up := actStop, actCont
	if loseState {
		down, up = actKill, actRestart
	}
	steps := []step{{what: fmt.Sprintf("%s %s", down, names), nodes: nodes, act: down}}
	isSwitch := len(nodes) == 1 && nodes[0] == switchProc
	if dur > 0 || isSwitch {
		// A killed process's replacement builds its testbed while the
		// node is down, and runs from dur on.
		steps[0].respawn, steps[0].restartAfter = loseState, dur
		return append(steps, step{after: dur, what: fmt.Sprintf("%s %s", up, names), nodes: nodes, act: up})
	}
	var busy []string
	for _, n := range nodes {
		if !topo.idle(n) {
			busy = append(busy, n)
		}
	}
	if len(busy) == 0 {
		return steps // an idle PS: the run does not need it
	}
	// The emulator's words (harness/run: faults).
	return append(steps, step{what: "fatal", fatal: func(at time.Duration) error {
		return fmt.Errorf("%s crashed at %v and does not restart: the jobs it serves cannot finish", strings.Join(busy, ", "), at)
	}})
}

// FaultRecord is a scenario fault as it fired: when (wall time since the
// run's time 0), what it did and, for a fault with an end (a restart, a
// resume, a window that closes by itself), when that came.
type FaultRecord struct {
	Index     int     `json:"index"` // in the scenario's faults
	Kind      string  `json:"kind"`
	Target    string  `json:"target"`
	Planned   Seconds `json:"planned_s"` // the scenario's at
	Fired     Seconds `json:"fired_s"`
	Duration  Seconds `json:"duration_s,omitempty"`
	Value     float64 `json:"value,omitempty"`
	LoseState bool    `json:"lose_state,omitempty"`
	Direction string  `json:"direction,omitempty"`
	// When is the event a fault timed from the workload waited for
	// (faults[].when); Planned is then the event's time plus the fault's
	// at, Fired -1 if the event never came.
	When string `json:"when,omitempty"`
	// Steps are what was done, each with its wall time since time 0.
	Steps []FaultStep `json:"steps"`
	Error string      `json:"error,omitempty"`
}

// FaultStep is one action of a fault that ran.
type FaultStep struct {
	At    Seconds `json:"at_s"`
	What  string  `json:"what"`
	Error string  `json:"error,omitempty"`
}

// pending is a step waiting for its time.
type pending struct {
	at    time.Duration // since time 0
	fault int           // index into the records
	step  step
}

// schedule is the run's fault steps in time order.
type schedule struct {
	steps   []pending
	records []FaultRecord
	// later are the steps of the faults timed from an event
	// (faults[].when), by record, until trigger schedules them.
	later map[int][]step
}

// newSchedule plans every fault of s; an error names the fault.
func newSchedule(s *scenario.Scenario, topo topology) (*schedule, error) {
	sc := &schedule{later: map[int][]step{}}
	for i, f := range s.Faults {
		steps, err := faultSteps(i, f, topo)
		if err != nil {
			return nil, fmt.Errorf("%s: faults[%d]: %w", s.File(), i, err)
		}
		rec := FaultRecord{Index: i, Kind: f.Kind, Target: f.Target, Planned: Seconds(f.At),
			Duration: Seconds(f.Duration), Value: f.Value, LoseState: f.LoseState, Direction: f.Direction, Fired: -1}
		if f.When != nil {
			rec.When = f.When.String()
			sc.records = append(sc.records, rec)
			sc.later[len(sc.records)-1] = steps
			continue
		}
		sc.records = append(sc.records, rec)
		sc.add(len(sc.records)-1, f.At.D(), steps)
	}
	return sc, nil
}

// add schedules steps of record rec from at on.
func (sc *schedule) add(rec int, at time.Duration, steps []step) {
	for _, st := range steps {
		sc.steps = append(sc.steps, pending{at: at + st.after, fault: rec, step: st})
	}
	slices.SortStableFunc(sc.steps, func(a, b pending) int { return int(a.at - b.at) })
}

// trigger schedules the fault of record rec, timed from an event that has
// happened at event (since time 0): its at later, as the emulator does.
// Only the first trigger of a fault counts.
func (sc *schedule) trigger(rec int, event time.Duration) {
	steps, ok := sc.later[rec]
	if !ok {
		return
	}
	delete(sc.later, rec)
	r := &sc.records[rec]
	r.Planned += Seconds(event) // its at is the delay after the event
	sc.add(rec, r.Planned.D(), steps)
}

// next returns the time of the next step, if any.
func (sc *schedule) next() (time.Duration, bool) {
	if len(sc.steps) == 0 {
		return 0, false
	}
	return sc.steps[0].at, true
}

// due removes and returns the steps due at now.
func (sc *schedule) due(now time.Duration) []pending {
	i := 0
	for i < len(sc.steps) && sc.steps[i].at <= now {
		i++
	}
	out := sc.steps[:i:i]
	sc.steps = sc.steps[i:]
	return out
}

// fired returns the faults that fired.
func (sc *schedule) fired() []FaultRecord {
	var out []FaultRecord
	for _, r := range sc.records {
		if r.Fired >= 0 {
			out = append(out, r)
		}
	}
	return out
}
