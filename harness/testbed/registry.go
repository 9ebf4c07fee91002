package testbed

import (
	"slices"

	"github.com/inabox/inabox/switch/dynaina"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// Policy is one switch-memory policy together with the endpoints that go
// with it: how to program the switch, which node runs it (its control
// plane included), which parameter-server and worker endpoints the hosts
// run, and what it observed. A Policy value belongs to one testbed (New in
// its registry Entry makes a fresh one), so it may keep what it installed.
//
// Build calls, in order: Switch, then PS for every PS (Spec.NumPS of them,
// placed by the testbed: Testbed.PSOf) and Worker for every worker; the
// observers after or during a run.
type Policy interface {
	// Name is the name the policy is registered under.
	Name() string
	// Switch creates t's switch (t.newSwitch), programs it for t's jobs —
	// pools, slot stages, job and worker tables, rewrites, multicast
	// groups — and returns the node that runs it.
	Switch(t *Testbed) (emu.Node, error)
	// PS returns parameter server i's node, serving the jobs j with
	// t.PSOf(j) == i.
	PS(t *Testbed, i int) (emu.Node, error)
	// Worker returns worker rank of job's endpoint, all-reducing ts.
	Worker(t *Testbed, job, rank int, ts []host.Tensor) (Worker, error)
	// Occupancy reports the switch memory each job holds now.
	Occupancy(t *Testbed) []Occupied
	// Counters returns job's counters.
	Counters(t *Testbed, job int) Counters
	// Check returns an invariant the run broke, or nil.
	Check(t *Testbed) error
	// Failed returns why the testbed can no longer finish, naming the
	// node (a QP that gave up, a message that could not be posted), or nil.
	Failed(t *Testbed) error
}

// Entry is a registered policy.
type Entry struct {
	Name string
	// Summary is one line for help texts and docs.
	Summary string
	// Baseline marks a comparison point, as opposed to a design under
	// study.
	Baseline bool
	// Reference marks the baseline comparisons are relative to (one
	// policy: the state of the art the seed papers compare with, ATP).
	Reference bool
	// PSPath marks a policy whose chunks can take a path through a
	// parameter server (its PS-path fraction means something).
	PSPath bool
	// NoINA marks a policy that uses no switch memory (its memory metrics
	// are null, not 0 %).
	NoINA bool
	// SoftwareStack marks a policy whose hosts run a software network
	// stack, not an RDMA NIC's offload: they pay Spec.SoftwareStack (any
	// policy pays Spec.WorkerStack and PSStack when given).
	SoftwareStack bool
	// Stack is the cited cost of the policy's software stack, the default
	// of a scenario with topology.costs sourced (zero: line rate);
	// StackSource says where it comes from (docs/costs.md).
	Stack       SoftwareStack
	StackSource string
	// Variant marks an ablation of another policy (a design with one of
	// its mechanisms off or an option on): it can be named (--policy,
	// --policies) but is left out of Names, so `compare` and the golden
	// outputs run only the policies themselves.
	Variant bool
	// New returns a fresh policy for one testbed.
	New func() Policy
}

// registry lists every policy a scenario can name, baselines first, in
// the order help texts and comparisons show them. Adding a policy is one
// file with its Policy and one line here (docs/adding-a-policy.md).
var registry = []Entry{
	{Name: "none", Summary: "no INA: a host ring all-reduce over RC (NCCL's default)", Baseline: true, NoINA: true, New: newRing},
	{Name: "switchml", Summary: "SwitchML: static per-job slots, a pool per job for its lifetime divided among the jobs present (a job waits when none is free), self-clocked window", Baseline: true, PSPath: true, SoftwareStack: true,
		StackSource: "no figure found for SwitchML's DPDK client; its repository's RDMA client runs near RDMA goodput (2.8 G elements/s at 4–16 workers): line rate", New: newSwitchML},
	{Name: "atp", Summary: "ATP: a shared hashed pool, results through the PS", Baseline: true, Reference: true, PSPath: true, SoftwareStack: true,
		Stack: atpStack, StackSource: atpStackSource, New: newATP},
	{Name: "esa", Summary: "ESA: ATP with priority preemption", Baseline: true, PSPath: true, SoftwareStack: true,
		Stack: atpStack, StackSource: atpStackSource + " (ESA runs on ATP's hosts)", New: newESA},
	{Name: "freeina", Summary: "FreeINA: per-all-reduce leases, host-driven INA and RC paths", PSPath: true, New: newFreeINA},
	{Name: "dynaina", Summary: "DynaINA: FreeINA's paths with dynamic pools and contention-aware scheduling", PSPath: true, New: newDynaINA},
	// DynaINA's ablation (docs/dynaina.md): each mechanism on in turn.
	{Name: "dynaina-pools", Summary: "DynaINA ablation: dynamic pools only (no sharing by time, no queueing, no priority)", PSPath: true, Variant: true,
		New: dynainaVariant("dynaina-pools", func(c *dynaina.Config) { c.NoSharing, c.NoPriority = true, true })},
	{Name: "dynaina-sched", Summary: "DynaINA ablation: dynamic pools and contention-aware scheduling, no priority", PSPath: true, Variant: true,
		New: dynainaVariant("dynaina-sched", func(c *dynaina.Config) { c.NoPriority = true })},
	{Name: "dynaina-lend", Summary: "DynaINA with idle pools lent and measured overlap (phase-locked jobs split)", PSPath: true, Variant: true,
		New: dynainaVariant("dynaina-lend", func(c *dynaina.Config) { c.Lend, c.MeasuredOverlap = true, true })},
}

// atpStack is ATP's user-space stack: its code notes it runs at about 46
// Gb/s (against 100 Gb/s NICs).
var atpStack = SoftwareStack{BitsPerSecond: 46e9}

const atpStackSource = "in-ATP/ATP common/window_manager.h: \"the performance will drop from 46Gbps to 40Gbps\""

// Entries returns every registered policy, in registry order.
func Entries() []Entry { return slices.Clone(registry) }

// Names returns the registered policy names but the variants, in
// registry order.
func Names() []string {
	var out []string
	for _, e := range registry {
		if !e.Variant {
			out = append(out, e.Name)
		}
	}
	return out
}

// Variants returns the names of the ablation variants, in registry order.
func Variants() []string {
	var out []string
	for _, e := range registry {
		if e.Variant {
			out = append(out, e.Name)
		}
	}
	return out
}

// Baselines returns the names of the baseline policies, in registry order.
func Baselines() []string {
	var out []string
	for _, e := range registry {
		if e.Baseline {
			out = append(out, e.Name)
		}
	}
	return out
}

// Reference returns the name of the reference policy.
func Reference() string {
	for _, e := range registry {
		if e.Reference {
			return e.Name
		}
	}
	return ""
}

// Lookup returns the policy registered under name.
func Lookup(name string) (Entry, bool) {
	for _, e := range registry {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}
