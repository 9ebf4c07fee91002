package scenario

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inabox/inabox/emu/nodes"
	"github.com/inabox/inabox/harness/testbed"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/inahdr"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate checks every field; it names the first problem of each field.
// Call it again after changing a loaded scenario (e.g. a --policy or --seed
// override).
func (s *Scenario) Validate(models Models) error {
	models = s.withOwn(models)
	v := validator{s: s}
	v.check("name", s.Name, namePattern.MatchString(s.Name), "must match [A-Za-z0-9_.-]+")
	v.check("time_limit", s.TimeLimit, s.TimeLimit > 0, "must be > 0")
	_, known := testbed.Lookup(s.Policy)
	v.check("policy", s.Policy, known, "must be one of "+strings.Join(testbed.Names(), ", ")+" (or a variant: "+strings.Join(testbed.Variants(), ", ")+")")
	v.check("atp.window", s.ATP.Window, s.ATP.Window >= 0 && s.ATP.Window <= 1<<20, "must be 0 (no cap) or a window of chunks up to 1048576")
	v.check("atp.budget", s.ATP.Budget, s.ATP.Budget >= 0, "must be 0 (no budget: the whole pool) or a number of aggregators")
	if fw := s.ATP.FirstWait; fw != nil {
		v.check("atp.first_wait", *fw, *fw >= 0 && fw.D() <= time.Hour, "must be in [0, 1h] (0: the RTO from the start)")
	}
	v.check("dynaina.min_slots", s.DynaINA.MinSlots, s.DynaINA.MinSlots >= 0, "must be ≥ 1 (0: the default)")
	v.check("freeina_path", s.FreeINAPath, s.FreeINAPath == "uc" || s.FreeINAPath == "trim", "must be uc or trim")
	v.check("scaling.tensor_scale", s.Scaling.TensorScale, s.Scaling.TensorScale > 0 && s.Scaling.TensorScale <= 1, "must be in (0, 1]")
	v.check("scaling.rate_scale", s.Scaling.RateScale, s.Scaling.RateScale > 0 && s.Scaling.RateScale <= 1, "must be in (0, 1]")

	t := s.Topology
	v.check("topology.link_gbps", t.LinkGbps, t.LinkGbps > 0 && t.LinkGbps <= MaxLinkGbps, fmt.Sprintf("must be in (0, %d]", MaxLinkGbps))
	v.check("topology.link_delay", t.LinkDelay, t.LinkDelay >= 0 && t.LinkDelay.D() <= time.Second, "must be in [0, 1s]")
	v.check("topology.queue_packets", t.QueuePackets, t.QueuePackets >= 0 && t.QueuePackets <= MaxQueuePackets,
		fmt.Sprintf("must be in [0, %d] (0 = the emulator default)", MaxQueuePackets))
	if t.LinkGbps > 0 && s.Scaling.RateScale > 0 {
		v.check("scaling.rate_scale", s.Scaling.RateScale, s.LinkBitsPerSecond() >= MinLinkBitsPerSecond && s.PSLinkBitsPerSecond() >= MinLinkBitsPerSecond,
			fmt.Sprintf("makes a link slower than %d b/s (link_gbps × rate_scale)", MinLinkBitsPerSecond))
	}
	maxW := 0
	sumW := 0
	for _, j := range s.Jobs {
		maxW = max(maxW, j.Workers)
		sumW += j.Workers
	}
	if t.Hosts != 0 {
		v.check("topology.hosts", t.Hosts, t.Hosts >= 1 && t.Hosts <= MaxHosts, fmt.Sprintf("must be 0 (one per worker) or between 1 and %d", MaxHosts))
		v.check("topology.hosts", t.Hosts, t.Hosts >= maxW, fmt.Sprintf("must be ≥ the largest job's workers (%d): a job's workers sit on distinct hosts", maxW))
	} else {
		v.check("jobs", sumW, sumW <= MaxHosts, fmt.Sprintf("total workers must be ≤ %d when topology.hosts is 0", MaxHosts))
	}
	v.check("topology.switch.slots", t.Switch.Slots, t.Switch.Slots >= 1 && t.Switch.Slots <= sw.MaxSlots, fmt.Sprintf("must be between 1 and %d", sw.MaxSlots))
	v.check("topology.switch.values_per_packet", t.Switch.ValuesPerPacket, t.Switch.ValuesPerPacket >= 1 && t.Switch.ValuesPerPacket <= inahdr.MaxValues,
		fmt.Sprintf("must be between 1 and %d", inahdr.MaxValues))
	v.check("topology.switch.pass_time", t.Switch.PassTime, t.Switch.PassTime >= 0 && t.Switch.PassTime.D() <= time.Millisecond, "must be in [0, 1ms]")
	v.check("topology.switch.latency", t.Switch.Latency, t.Switch.Latency >= 0 && t.Switch.Latency.D() <= time.Millisecond, "must be in [0, 1ms]")
	if t.Switch.Slots >= 1 && t.Switch.ValuesPerPacket >= 1 {
		// The switch's memory in aggregators, as the testbed shares it
		// out (at least one), and what the policies ask of it.
		stride := sw.SlotsPerAggregator(t.Switch.ValuesPerPacket)
		whole := t.Switch.Slots / stride
		aggs := max(whole, 1)
		if m := s.DynaINA.MinSlots; m > 0 {
			v.check("dynaina.min_slots", m, m <= aggs, fmt.Sprintf("must be at most the switch's %d aggregators", aggs))
		}
		if s.Policy == "switchml" {
			// SwitchML admits a job only with a whole pool: with less
			// memory than its smallest, every job would wait until the
			// time limit.
			v.check("topology.switch.slots", t.Switch.Slots, whole >= sw.SwitchMLMinAggregators,
				fmt.Sprintf("must hold at least %d aggregators (%d slots at %d values a packet) under policy switchml: "+
					"SwitchML admits a job only with a pool of %d or more (a window of one chunk and its shadow copy), so no job could start",
					sw.SwitchMLMinAggregators, sw.SwitchMLMinAggregators*stride, t.Switch.ValuesPerPacket, sw.SwitchMLMinAggregators))
		}
		if s.ATP.Budget > 0 {
			v.check("atp.budget", s.ATP.Budget, s.ATP.Budget <= aggs,
				fmt.Sprintf("must be at most the switch's %d aggregators (topology.switch.slots / %d slots per aggregator)", aggs, stride))
		}
	}
	if v.check("topology.ps.placement", t.PS.Placement,
		t.PS.Placement == PlacementDedicated || t.PS.Placement == PlacementShared || t.PS.Placement == PlacementCoLocated,
		"must be dedicated (each job its own PS), shared (count PSs serve every job) or co-located (each job's PS on its worker rank 0's host)") {
		switch {
		case t.PS.Placement == PlacementShared:
			v.check("topology.ps.count", t.PS.Count, t.PS.Count >= 1 && t.PS.Count <= MaxPS, fmt.Sprintf("must be between 1 and %d", MaxPS))
		case s.has("topology.ps.count"):
			v.check("topology.ps.count", t.PS.Count, false,
				fmt.Sprintf("applies to placement: shared only (placement %s gives each job one PS)", t.PS.Placement))
		}
		if t.PS.Placement == PlacementCoLocated && s.has("topology.ps.link_gbps") {
			v.check("topology.ps.link_gbps", t.PS.LinkGbps, false,
				"does not apply to placement: co-located (each PS uses its worker's host link, at topology.link_gbps)")
		}
	}
	v.check("jobs", len(s.Jobs), len(s.Jobs) <= MaxPS || t.PS.Placement == PlacementShared,
		fmt.Sprintf("at most %d jobs with %s PSs", MaxPS, t.PS.Placement))
	v.stack("topology.software_stack", t.SoftwareStack)
	for _, k := range slices.Sorted(maps.Keys(t.HostCosts)) {
		at := "topology.host_costs." + k
		if _, ok := testbed.Lookup(k); !v.check(at, k, ok, "must be a policy: one of "+strings.Join(testbed.Names(), ", ")+" (or a variant: "+strings.Join(testbed.Variants(), ", ")+")") {
			continue
		}
		v.stack(at+".workers", t.HostCosts[k].Workers)
		v.stack(at+".ps", t.HostCosts[k].PS)
		if t.PS.Placement == PlacementCoLocated && (s.has(at+".ps") || t.HostCosts[k].PS != (SoftwareStack{})) {
			v.fail(at+".ps", t.HostCosts[k].PS.String(),
				"does not apply to placement: co-located (each PS shares its worker's host link and pays the workers' cost)")
		}
	}
	if c := t.PS.CPU; c != nil {
		v.check("topology.ps.cpu.cores", c.Cores, c.Cores >= 1 && c.Cores <= MaxPSCores, fmt.Sprintf("must be between 1 and %d", MaxPSCores))
		v.check("topology.ps.cpu.gbps_per_core", c.GbpsPerCore, c.GbpsPerCore >= 0 && c.GbpsPerCore <= MaxLinkGbps, fmt.Sprintf("must be in [0, %d] (0: no per-byte cost)", MaxLinkGbps))
		v.check("topology.ps.cpu.per_packet", c.PerPacket, c.PerPacket >= 0 && c.PerPacket.D() <= time.Millisecond, "must be in [0, 1ms]")
		v.check("topology.ps.cpu.queue_packets", c.QueuePackets, c.QueuePackets >= 0 && c.QueuePackets <= MaxQueuePackets, fmt.Sprintf("must be in [0, %d] (0: %d)", MaxQueuePackets, nodes.DefaultCPUQueue))
		if c.GbpsPerCore == 0 && c.PerPacket == 0 {
			v.fail("topology.ps.cpu.gbps_per_core", c.GbpsPerCore, "and per_packet are both 0: the CPU costs nothing (set one, or leave cpu out)")
		}
	}
	v.check("topology.costs", t.Costs, t.Costs == "" || t.Costs == CostsSourced || t.Costs == CostsNone, "must be sourced (cited defaults) or none (no host cost)")
	v.check("topology.ps.link_gbps", t.PS.LinkGbps, t.PS.LinkGbps > 0 && t.PS.LinkGbps <= MaxLinkGbps, fmt.Sprintf("must be in (0, %d]", MaxLinkGbps))

	v.check("jobs", len(s.Jobs), len(s.Jobs) > 0, "need at least one job")
	names := map[string]int{}
	for i, j := range s.Jobs {
		p := fmt.Sprintf("jobs[%d].", i)
		if v.check(p+"name", j.Name, namePattern.MatchString(j.Name), "must match [A-Za-z0-9_.-]+") {
			if k, dup := names[j.Name]; dup {
				v.fail(p+"name", j.Name, fmt.Sprintf("duplicate: jobs[%d] has this name", k))
			}
			names[j.Name] = i
		}
		_, known := models[j.Model]
		v.check(p+"model", j.Model, known, "unknown model; known: "+strings.Join(models.Names(), ", "))
		v.check(p+"workers", j.Workers, j.Workers >= 1 && j.Workers <= MaxJobWorkers, fmt.Sprintf("must be between 1 and %d", MaxJobWorkers))
		v.check(p+"iterations", j.Iterations, j.Iterations >= 1 && j.Iterations <= MaxIterations, fmt.Sprintf("must be between 1 and %d", MaxIterations))
		v.check(p+"arrival", j.Arrival, j.Arrival >= 0 && j.Arrival < s.TimeLimit, "must be in [0, time_limit)")
		v.check(p+"priority", j.Priority, j.Priority >= 0 && j.Priority <= 255, "must be between 0 and 255")
		if s.has(p + "comm_ratio") {
			v.check(p+"comm_ratio", j.CommRatio, j.CommRatio >= MinCommRatio && j.CommRatio <= 1000, fmt.Sprintf("must be in [%g, 1000]", MinCommRatio))
		}
		if v.check(p+"bucket_mib", j.BucketMiB, j.BucketMiB >= 0 && j.BucketMiB <= MaxBucketMiB, fmt.Sprintf("must be in [0, %d] (0: no buckets)", MaxBucketMiB)) &&
			j.BucketMiB > 0 && known && j.Iterations >= 1 {
			nb := models[j.Model].numBuckets(int64(math.Round(j.BucketMiB * (1 << 20))))
			v.check(p+"iterations", j.Iterations, nb <= MaxIterations && int64(j.Iterations)*nb <= MaxIterations,
				fmt.Sprintf("× %d buckets is more than %d all-reduces", nb, MaxIterations))
		}
		if i < s.listed || s.index == nil {
			v.checkCompute(p+"compute.", j.Compute, j.Workers, s.TimeLimit)
		}
	}
	v.checkCompute("compute.", s.Compute, 0, s.TimeLimit)
	if a := s.Arrivals; a != nil {
		v.checkCompute("arrivals.compute.", a.Compute, 0, s.TimeLimit)
	}

	links := map[string]bool{}
	for _, h := range s.HostNames() {
		links[h] = true
	}
	for _, h := range s.PSNames() {
		links[h] = true
	}
	linkRule := "must name a link by its host: h0..h" + strconv.Itoa(s.NumHosts()-1) + " or ps0..ps" + strconv.Itoa(t.PS.Count-1)
	v.validateFaults(links, linkRule, models)
	if len(v.errs) == 0 {
		v.checkRunSize(models, false)
	}
	return v.err()
}

// CheckProcesses refuses a valid scenario whose run as inabox up's
// processes on one machine would hold more than the bound
// (RunMemoryLimit): the
// processes hold what a run in virtual time holds and, for a job whose
// gradients are made on demand, also a result per worker (4 B per element
// after tensor_scale, each in its worker's process). The error has
// Validate's form.
func (s *Scenario) CheckProcesses(models Models) error {
	v := validator{s: s}
	v.checkRunSize(s.withOwn(models), true)
	return v.err()
}

// err is v's errors in file order, or nil.
func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	// File order; errors without a line (defaults, derived checks) last.
	slices.SortStableFunc(v.errs, func(a, b *FieldError) int {
		la, lb := a.Line, b.Line
		if la == 0 {
			la = math.MaxInt
		}
		if lb == 0 {
			lb = math.MaxInt
		}
		return cmp.Compare(la, lb)
	})
	return &Error{Errs: v.errs}
}

type validator struct {
	s    *Scenario
	errs []*FieldError
}

func (v *validator) check(p string, val any, ok bool, rule string) bool {
	if !ok {
		v.fail(p, val, rule)
	}
	return ok
}

// stack checks a host cost at path p.
func (v *validator) stack(p string, st SoftwareStack) {
	v.check(p+".gbps", st.Gbps, st.Gbps >= 0 && st.Gbps <= MaxLinkGbps, fmt.Sprintf("must be in [0, %d] (0: the link's rate)", MaxLinkGbps))
	v.check(p+".tx_gbps", st.TxGbps, st.TxGbps >= 0 && st.TxGbps <= MaxLinkGbps, fmt.Sprintf("must be in [0, %d] (0: gbps)", MaxLinkGbps))
	v.check(p+".rx_gbps", st.RxGbps, st.RxGbps >= 0 && st.RxGbps <= MaxLinkGbps, fmt.Sprintf("must be in [0, %d] (0: gbps)", MaxLinkGbps))
	v.check(p+".latency", st.Latency, st.Latency >= 0 && st.Latency.D() <= time.Second, "must be in [0, 1s]")
}

func (v *validator) fail(p string, val any, rule string) {
	fe := &FieldError{File: v.s.file, Path: p, Rule: rule}
	switch x := val.(type) {
	case string:
		fe.Value = strconv.Quote(x)
	case float64:
		fe.Value = strconv.FormatFloat(x, 'g', -1, 64)
	default:
		fe.Value = fmt.Sprint(x)
	}
	if v.s.index != nil {
		fe.Line = v.s.index.line(p)
		if _, isString := val.(string); !isString {
			if raw, ok := v.s.index.value(p); ok {
				fe.Value = raw // as written in the file
			}
		}
	}
	v.errs = append(v.errs, fe)
}

// The most a run may hold and do before its first step:
// MaxRunGradientBytes of gradients, reference sums and results, and
// MaxWorkerAllReduces all-reduces over all the workers of all jobs (each
// one's tensor and report exist from the start). A job's share of the
// bytes (runBytes) is 4 B per element after tensor_scale, 2 copies per
// worker and 2 sums; above LazyGradientBytes, whose gradients and sums are
// made on demand and whose results a run in virtual time checks as they
// arrive and keeps none, what its parameter server holds:
// PSResultBytesPerElement. The ring holds more (each worker's gradient
// quantized and its queued messages): the runner checks it against the
// same bound when the policy is known (harness/run), and inabox up's
// worker processes, which keep a result each, are checked by
// CheckProcesses. They keep a valid scenario within the memory of the
// machines the emulator runs on, and the preparation a run does before it
// can be interrupted within seconds.
//
// The byte bound can be raised or lowered for a machine with more or less
// memory: RunMemoryLimit.
const (
	MaxRunGradientBytes = 8 << 30
	MaxWorkerAllReduces = 4_000_000
)

// RunMemoryEnv names the environment variable that sets the byte bound in
// GiB in place of MaxRunGradientBytes (e.g. INABOX_MAX_RUN_GIB=16 on a
// machine with 32 GiB). inabox up's processes inherit it.
const RunMemoryEnv = "INABOX_MAX_RUN_GIB"

// RunMemoryLimit is the bound on what a run holds, in bytes:
// MaxRunGradientBytes, or RunMemoryEnv's value when it is set. A value that
// is not a number of GiB in (0, 1048576] is an error naming the variable.
func RunMemoryLimit() (int64, error) {
	v, ok := os.LookupEnv(RunMemoryEnv)
	if !ok || v == "" {
		return MaxRunGradientBytes, nil
	}
	g, err := strconv.ParseFloat(v, 64)
	if err != nil || !(g > 0 && g <= 1<<20) {
		return 0, fmt.Errorf("%s=%q: want a number of GiB in (0, 1048576]", RunMemoryEnv, v)
	}
	return int64(g * (1 << 30)), nil
}

// PSResultBytesPerElement bounds what a run holds per element of a job
// whose gradients are made on demand: chiefly its parameter server's sums
// of the chunks aggregated there, kept until every worker has moved past
// their all-reduce (ATP and ESA, and FreeINA's and DynaINA's PS path).
// Measured as the growth of peak RSS per element, the collector's headroom
// included (vgg16, 2 iterations, 32 slots, tensor_scale 0.1 against 0.3 at
// rate_scale 0.1): ATP 9.8, 12.2 and 9.7 B with 4, 16 and 32 workers,
// FreeINA 10.4 B with 16.
const PSResultBytesPerElement = 12

// LazyGradientBytes is the size of a job's gradients and reference sums
// (4 B per element, 2 variants per worker and 2 sums) above which the
// runner makes them on demand instead of holding them (harness/run); such
// a job's workers hold a result each (4 B per element) as they all-reduce
// in inabox up's processes (in virtual time results are checked as they
// arrive).
const LazyGradientBytes = 256 << 20

// HeldGradientBytes is what the runner holds for a job of elems elements
// and workers workers when it does not make its gradients on demand: 4 B
// per element, 2 variants per worker and 2 reference sums. Above
// LazyGradientBytes it makes them on demand instead.
func HeldGradientBytes(elems int64, workers int) int64 {
	return 4 * elems * int64(2*workers+2)
}

// runBytes is what a run in virtual time holds for a job of elems
// elements (Plan's, buckets rounded up) and workers workers, and whether
// its gradients are made on demand.
func runBytes(elems int64, workers int) (int64, bool) {
	if b := HeldGradientBytes(elems, workers); b <= LazyGradientBytes {
		return b, false
	}
	return PSResultBytesPerElement * elems, true
}

// runSize is what a run of s holds and does, counted for the bound: per
// job, its bytes of gradients, reference sums and results (as inabox up's
// processes if processes is set) and its all-reduces over all its workers.
func (s *Scenario) runSize(models Models, processes bool) (bytes, allReduces []int64) {
	for _, j := range s.Jobs {
		m := models[j.Model]
		nb := int64(1)
		if j.BucketMiB > 0 {
			nb = m.numBuckets(int64(math.Round(j.BucketMiB * (1 << 20))))
		}
		// Plan's elements: each bucket rounds up to at least one
		elems := int64(math.Ceil(float64(m.Elements())*s.Scaling.TensorScale)) + nb
		b, lazy := runBytes(elems, j.Workers)
		if lazy && processes {
			b += 4 * elems * int64(j.Workers) // and a result per worker process
		}
		bytes = append(bytes, b)
		allReduces = append(allReduces, int64(j.Workers)*int64(j.Iterations)*nb)
	}
	return bytes, allReduces
}

// RunBytes is what a run of valid scenario s holds of gradients, reference
// sums and results as the bound counts it (every job as if all ran at
// once; inabox up's processes if processes is set), against the bound
// (RunMemoryLimit; MaxRunGradientBytes if the variable is bad).
func (s *Scenario) RunBytes(models Models, processes bool) (held, limit int64) {
	bytes, _ := s.runSize(s.withOwn(models), processes)
	for _, b := range bytes {
		held += b
	}
	limit, err := RunMemoryLimit()
	if err != nil {
		limit = MaxRunGradientBytes
	}
	return held, limit
}

// checkRunSize refuses a scenario whose run would exceed the byte bound
// (RunMemoryLimit) or MaxWorkerAllReduces, naming its largest job; as
// inabox up's processes if processes is set (CheckProcesses).
func (v *validator) checkRunSize(models Models, processes bool) {
	s := v.s
	var bytes, allReduces, maxBytes, maxAllReduces int64
	bigB, bigA := 0, 0
	bs, as := s.runSize(models, processes)
	for i := range bs {
		b, a := bs[i], as[i]
		bytes += b
		allReduces += a
		if b > maxBytes {
			maxBytes, bigB = b, i
		}
		if a > maxAllReduces {
			maxAllReduces, bigA = a, i
		}
	}
	job := func(i int) string {
		if i >= s.listed && s.index != nil {
			return "arrivals" // a generated job: no line of its own
		}
		return fmt.Sprintf("jobs[%d]", i)
	}
	gib := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 2, 64) + " GiB" }
	limit, err := RunMemoryLimit()
	if err != nil {
		v.fail(RunMemoryEnv, os.Getenv(RunMemoryEnv), "want a number of GiB in (0, 1048576] (the bound on what a run holds; unset: 8)")
		return
	}
	setBy := ""
	if limit != MaxRunGradientBytes {
		setBy = " (" + RunMemoryEnv + ")"
	}
	if bytes > limit {
		j := s.Jobs[bigB]
		if processes {
			v.fail(job(bigB), fmt.Sprintf("%s × %d workers", j.Model, j.Workers), fmt.Sprintf(
				"inabox up's processes would hold %s of gradients, reference sums and results, %s of them this job's (after tensor_scale %g: 4 B per element, 2 copies per worker + 2; for a job over 256 MiB, whose gradients are made on demand, its parameter server's results, 12 B per element, and a result per worker, 4 B per element, kept by its process): at most %s%s; lower scaling.tensor_scale or the workers, run it in virtual time (inabox run), or raise %s on a machine with the memory",
				gib(bytes), gib(maxBytes), s.Scaling.TensorScale, gib(limit), setBy, RunMemoryEnv))
			return
		}
		v.fail(job(bigB), fmt.Sprintf("%s × %d workers", j.Model, j.Workers), fmt.Sprintf(
			"the run would hold %s of gradients, reference sums and results, %s of them this job's (after tensor_scale %g: 4 B per element, 2 copies per worker + 2; for a job over 256 MiB, whose gradients are made on demand, its parameter server's results, 12 B per element): at most %s%s; lower scaling.tensor_scale or the workers, or raise %s on a machine with the memory",
			gib(bytes), gib(maxBytes), s.Scaling.TensorScale, gib(limit), setBy, RunMemoryEnv))
	}
	if allReduces > MaxWorkerAllReduces {
		p := job(bigA)
		if p != "arrivals" {
			p += ".iterations"
		}
		j := s.Jobs[bigA]
		v.fail(p, j.Iterations, fmt.Sprintf("× %d workers × %d all-reduces per iteration = %d all-reduces (all jobs: %d): at most %d over all workers",
			j.Workers, maxAllReduces/int64(j.Workers)/int64(j.Iterations), maxAllReduces, allReduces, MaxWorkerAllReduces))
	}
}
