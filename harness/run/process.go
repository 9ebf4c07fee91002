package run

import (
	"fmt"
	"slices"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
	"github.com/inabox/inabox/host"
	sw "github.com/inabox/inabox/switch"
)

// Prepared is a scenario's testbed built for one policy and not run: the
// network the virtual-time runner drives, from which the process runtime
// (`inabox up`) takes one node per process. Every process prepares the same
// scenario with the same seed and policy, so each runs the very node the
// emulator would run — no forked logic.
type Prepared struct {
	r *runner
}

// Peer is a node attached to the switch: a worker or a PS, the switch port
// it is on and its link (both directions as the emulator models them).
type Peer struct {
	Node string
	// Role is "worker" or "ps"; Job (0-based) and Rank say which worker,
	// Index which PS.
	Role       string
	Job, Rank  int
	Index      int
	SwitchPort int
	// Host is the scenario's name for the peer's link (faults, impairments):
	// its worker host h<k>, or ps<i> for a PS.
	Host string
	// ToSwitch and FromSwitch are the link's two directions.
	ToSwitch, FromSwitch emu.LinkConfig
	// FlapUp and FlapDown make a direction (toward the switch, from it)
	// fail and recover at random (impairments[].flap), or are nil.
	FlapUp, FlapDown *scenario.Flap
	// CoLocated is set on a worker whose host its job's PS shares
	// (topology.ps.placement: co-located): the worker's process then runs
	// the host's NIC, the worker and the PS.
	CoLocated *CoLocated
}

// CoLocated is what a host shared by a worker and its job's PS runs besides
// the worker: the host's NIC, which is the node on the switch link, and the
// PS. The worker and the PS hang off NIC ports over links inside the host
// (Prepared.Inside).
type CoLocated struct {
	NIC string
	PS  string
	// PSIndex is the PS's index; PSLink is the scenario's name of its link
	// ("ps0"), which is the host's link: faults and impairments on either
	// name act on it.
	PSIndex int
	PSLink  string
}

// Inner is a node behind a co-located host's NIC: its name, its port 0
// and the NIC port it is linked to, and that link's configuration (both
// directions alike).
type Inner struct {
	Node    string
	NICPort int
	Link    emu.LinkConfig
}

// Inside lists the nodes behind pe's NIC (its worker and its PS) in the
// network's link order; nil unless pe.CoLocated is set.
func (p *Prepared) Inside(pe Peer) []Inner {
	if pe.CoLocated == nil {
		return nil
	}
	var out []Inner
	for _, l := range p.Network().Links() {
		a, b := l.Ends()
		cfg := l.Config(emu.AtoB)
		if b.Node == pe.CoLocated.NIC {
			a, b = b, a
		}
		if a.Node == pe.CoLocated.NIC && b.Node != p.SwitchName() {
			out = append(out, Inner{Node: b.Node, NICPort: a.Port, Link: cfg})
		}
	}
	return out
}

// Prepare builds scenario s under opts (seed and policy) with its
// impairments applied, for running node by node. opts.PcapDir, Progress and
// Step do not apply.
func Prepare(s *scenario.Scenario, opts Options) (*Prepared, error) {
	r, err := prepare(s, opts, false)
	if err != nil {
		return nil, err
	}
	return &Prepared{r: r}, nil
}

// Scenario returns the scenario.
func (p *Prepared) Scenario() *scenario.Scenario { return p.r.s }

// Policy and Seed are the ones in force (options applied).
func (p *Prepared) Policy() string { return p.r.policy }
func (p *Prepared) Seed() uint64   { return p.r.seed }

// Plans returns the jobs as planned.
func (p *Prepared) Plans() []scenario.JobPlan { return p.r.plans }

// Network returns the built, never-run network.
func (p *Prepared) Network() *emu.Network { return p.r.tb.Net }

// SwitchName is the switch node's name.
func (p *Prepared) SwitchName() string { return testbed.SwitchNode }

// Switch returns the switch's data plane (for its control API).
func (p *Prepared) Switch() *sw.Switch { return p.r.tb.Switch }

// Events returns the cluster manager's timed calls on node's state, in
// order (testbed.Event: the switch's job registrations under DynaINA). The
// virtual-time network has them scheduled already; a process that runs
// node schedules them on its own network.
func (p *Prepared) Events(node string) []testbed.Event {
	var out []testbed.Event
	for _, e := range p.r.tb.Events() {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out
}

// Failed returns why the testbed can no longer finish — a queue pair in
// the error state, with its node — or nil. In a process (inabox up) only
// the process's own node runs, so it names that node's failure.
func (p *Prepared) Failed() error { return p.r.tb.Failed() }

// Node returns the node named name and its port count.
func (p *Prepared) Node(name string) (emu.Node, int, error) {
	n, ports := p.Network().Node(name)
	if n == nil {
		return nil, 0, fmt.Errorf("%s: policy %s has no node %q (nodes: %v)", p.r.s.Name, p.r.policy, name, p.Network().Nodes())
	}
	return n, ports, nil
}

// Peers lists every node linked to the switch, in switch port order: a
// worker or PS, or a host shared by a worker and its job's PS (the worker's
// Peer, with CoLocated set). It fails if a link outside such a host does not
// touch the switch or a node is neither a worker nor a PS (the process
// runtime gives each peer its own namespace and one veth to the switch).
func (p *Prepared) Peers() ([]Peer, error) {
	roles := map[string]Peer{}
	for i, ws := range p.r.tb.Workers {
		for _, w := range ws {
			roles[w.Name] = Peer{Node: w.Name, Role: "worker", Job: i, Rank: w.Rank, Host: p.r.plans[i].Hosts[w.Rank]}
		}
	}
	inside := map[string]bool{} // nodes behind a co-located host's NIC
	for i, ps := range p.r.tb.PSs {
		link := fmt.Sprintf("ps%d", i)
		if p.r.tb.Spec.PSPlacement == testbed.PSCoLocated {
			w := p.r.tb.Worker(i, 0) // job i's rank 0 shares its host with ps i
			pe := roles[w.Name]
			nic := testbed.NICNode(testbed.JobID(i), 0)
			pe.CoLocated = &CoLocated{NIC: nic, PS: ps.Name, PSIndex: ps.Index, PSLink: link}
			delete(roles, w.Name)
			roles[nic] = pe
			inside[w.Name], inside[ps.Name] = true, true
			continue
		}
		roles[ps.Name] = Peer{Node: ps.Name, Role: "ps", Index: ps.Index, Host: link}
	}
	swName := p.SwitchName()
	var out []Peer
	for _, l := range p.Network().Links() {
		a, b := l.Ends()
		toSw, fromSw := l.Config(emu.AtoB), l.Config(emu.BtoA)
		if a.Node == swName {
			a, b = b, a
			toSw, fromSw = fromSw, toSw
		}
		if b.Node != swName {
			if inside[a.Node] || inside[b.Node] {
				continue // inside a co-located host
			}
			return nil, fmt.Errorf("%s: policy %s: link %s does not touch the switch", p.r.s.Name, p.r.policy, l.Name())
		}
		pe, ok := roles[a.Node]
		if !ok || a.Port != 0 {
			return nil, fmt.Errorf("%s: policy %s: node %s port %d on the switch is neither a worker nor a PS", p.r.s.Name, p.r.policy, a.Node, a.Port)
		}
		pe.SwitchPort, pe.ToSwitch, pe.FromSwitch = b.Port, toSw, fromSw
		if fl := p.r.flaps[l]; fl != nil {
			pe.FlapUp, pe.FlapDown = fl[emu.AtoB], fl[emu.BtoA]
			if a0, _ := l.Ends(); a0.Node == swName {
				pe.FlapUp, pe.FlapDown = fl[emu.BtoA], fl[emu.AtoB]
			}
		}
		out = append(out, pe)
	}
	slices.SortFunc(out, func(x, y Peer) int { return x.SwitchPort - y.SwitchPort })
	return out, nil
}

// WorkerDone reports whether worker rank of job (0-based) has finished all
// its iterations. Call it on the goroutine that runs the worker's node.
func (p *Prepared) WorkerDone(job, rank int) bool {
	return p.r.tb.Worker(job, rank).Endpoint.Finished() >= p.r.plans[job].Iterations
}

// Finished is how many all-reduces worker rank of job (0-based) has
// finished. Call it on the goroutine that runs the worker's node.
func (p *Prepared) Finished(job, rank int) int {
	return p.r.tb.Worker(job, rank).Endpoint.Finished()
}

// Observe calls fn at each step of worker rank of job's all-reduces
// (host.Core.Observe), on the goroutine that runs its node. Observing
// changes nothing the worker does.
func (p *Prepared) Observe(job, rank int, fn func(host.Step)) {
	p.r.tb.Worker(job, rank).Endpoint.Observe(fn)
}

// Idle reports whether node does nothing the jobs need (the PS of a policy
// that uses none: switchml, none), so losing it does not stop the run.
func (p *Prepared) Idle(node string) bool { return p.r.tb.Idle(node) }

// IterationCheck is one all-reduce of one worker: its span on the worker's
// clock and whether its result equals the reference sum.
type IterationCheck struct {
	Iteration  int           `json:"iteration"`
	Start      time.Duration `json:"start_ns"`
	End        time.Duration `json:"end_ns"`
	Exact      bool          `json:"exact"`
	Mismatches int           `json:"mismatches"`
	Elements   int64         `json:"elements"`
}

// CheckWorker compares every all-reduce worker rank of job (0-based) has
// finished with the reference sum, element by element, and frees the
// results. Call it after the worker's node stopped running.
func (p *Prepared) CheckWorker(job, rank int) []IterationCheck {
	w := p.r.tb.Worker(job, rank).Endpoint
	var out []IterationCheck
	for k := 0; k < w.Finished(); k++ {
		c := p.Check(job, k, w.Result(k))
		c.Start, c.End = span(w, k)
		w.DropResult(k)
		out = append(out, c)
	}
	return out
}

// Check compares got, a result of job's all-reduce k, with the reference
// sum, element by element (the span is left for the caller). It computes
// and caches the reference: call it from one goroutine at a time.
func (p *Prepared) Check(job, k int, got []int32) IterationCheck {
	d := p.r.gen.compare(job, k, [][]int32{got})[0]
	c := IterationCheck{Iteration: k, Elements: int64(d.n), Mismatches: d.bad}
	c.Exact = c.Mismatches == 0
	return c
}

// Result returns worker rank of job's result of all-reduce k and its
// report, once it has finished (ok false before). Call it on the goroutine
// that runs the worker's node; a finished result is not written again, so
// it may be read elsewhere afterwards.
func (p *Prepared) Result(job, rank, k int) (res []int32, rep host.Report, ok bool) {
	w := p.r.tb.Worker(job, rank).Endpoint
	if k >= w.Finished() {
		return nil, host.Report{}, false
	}
	return w.Result(k), w.Reports()[k], true
}

// RestoreWorker puts worker rank of job where a checkpoint left it before
// a crash that lost its state: reps are the all-reduces it had finished.
// It reports false if the policy's workers cannot take a checkpoint (they
// cannot rejoin a running job: their Reset makes the run fail, naming
// them). Call it before the node starts, then Reset the node (emu Restart).
func (p *Prepared) RestoreWorker(job, rank int, reps []host.Report) (bool, error) {
	w := p.r.tb.Worker(job, rank).Endpoint
	if n := p.r.plans[job].AllReduces(); len(reps) > n {
		return false, fmt.Errorf("%s: a checkpoint of %d all-reduces, of %d", p.r.tb.Worker(job, rank).Name, len(reps), n)
	}
	r, ok := w.(interface{ Restore([]host.Report) })
	if !ok {
		return false, nil
	}
	r.Restore(reps)
	return true, nil
}
