package testbed

import (
	"math"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
	"github.com/inabox/inabox/host"
)

type scenario struct {
	name     string
	jobs     []int
	values   int
	elems    int
	ars      int
	impair   emu.Impairments
	reboot   time.Duration // crash the switch at this time (0: never)
	slots    int
	seed     uint64
	deadline time.Duration
	path     host.INAPath // zero: PathUC, the default
	tune     func(*Spec)
	// hook, if set, runs once the network has run to hookAt.
	hook   func(*Testbed)
	hookAt time.Duration
	policy string // "": freeina
}

func (sc *scenario) defaults() {
	if sc.values == 0 {
		sc.values = 64
	}
	if sc.ars == 0 {
		sc.ars = 1
	}
	if sc.deadline == 0 {
		sc.deadline = 2 * time.Second
	}
}

// runScenario builds the cluster, runs it and checks every worker's result
// exactly (int32) against a reference computed here, and the dequantized
// result against the documented bound.
func runScenario(t testing.TB, sc scenario) (*Testbed, time.Duration) {
	t.Helper()
	sc.defaults()
	cfg := Spec{Seed: sc.seed + 7, Jobs: jobSpecs(sc.jobs), ValuesPerPacket: sc.values, Impairments: sc.impair,
		Aggregators: sc.slots, INAPath: sc.path}
	if sc.tune != nil {
		sc.tune(&cfg)
	}
	inputs := map[[3]int][]float32{}
	policy := sc.policy
	if policy == "" {
		policy = "freeina"
	}
	c, err := Build(cfg, policy, tensors(inputs, sc.ars, sc.elems, func(job uint16, rank, a int) []float32 {
		return genTensor(job, rank, sc.elems, uint64(a))
	}))
	if err != nil {
		t.Fatal(err)
	}
	reboot(t, c, sc.reboot, 20*time.Microsecond)
	if sc.hook != nil {
		if _, err := c.Net.RunUntil(sc.hookAt); err != nil {
			t.Fatal(err)
		}
		sc.hook(c)
	}
	end, err := c.Run(sc.deadline, 0)
	if err != nil {
		for i, q := range c.FreeINAPS(0).QPs() {
			if q.Err() != nil {
				t.Logf("PS QP %d: %v %+v", i, q.Err(), q.Stats())
			}
		}
		for ji := range c.Workers {
			for r := range c.Workers[ji] {
				if w := c.FreeINAWorker(ji, r); w.QP().Err() != nil {
					t.Logf("worker %d.%d QP: %v %+v", ji+1, r, w.QP().Err(), w.QP().Stats())
				}
			}
		}
		t.Fatalf("%s: %v (ps %+v)", sc.name, err, c.FreeINAPS(0).Stats())
	}
	scale := math.Ldexp(1, host.DefaultFrac)
	for ji, n := range sc.jobs {
		job := uint16(ji + 1)
		lim := float64((1<<31 - 1) / n)
		bound := float64(n) * math.Ldexp(1, -(host.DefaultFrac+1))
		for a := 0; a < sc.ars; a++ {
			ref := make([]int64, sc.elems)
			sum := make([]float64, sc.elems)
			for r := 0; r < n; r++ {
				for i, x := range inputs[[3]int{int(job), r, a}] {
					ref[i] += int64(math.Max(-lim, math.Min(lim, math.RoundToEven(float64(x)*scale))))
					sum[i] += float64(x)
				}
			}
			for r, wh := range c.Workers[ji] {
				w := wh.Endpoint
				got := w.Result(a)
				for i := range ref {
					if int64(got[i]) != ref[i] {
						t.Fatalf("%s: job %d ar %d worker %d value %d = %d, want %d", sc.name, job, a, r, i, got[i], ref[i])
					}
				}
				if r == 0 || r == n-1 {
					for i, y := range w.Dequantized(a) {
						if math.Abs(y-sum[i]) > bound {
							t.Fatalf("%s: value %d: |%g − %g| > %g", sc.name, i, y, sum[i], bound)
						}
					}
				}
			}
		}
	}
	return c, end
}

// allReduceBound is the analytic bound the benchmark compares against:
// 2 × tensor bytes / rate, plus the per-packet header and Ethernet overhead.
func allReduceBound(elems, values int, rate float64) time.Duration {
	chunks := (elems + values - 1) / values
	bytes := float64(4*elems + chunks*(ChunkWireBytes(values)-4*values))
	return time.Duration(2 * bytes * 8 / rate * 1e9)
}

func logReports(t testing.TB, c *Testbed) {
	t.Helper()
	for _, r := range c.Workers[0][0].Endpoint.Reports() {
		t.Logf("  worker 0: %+v", r)
	}
	t.Logf("  ps %+v", c.FreeINAPS(0).Stats())
	t.Logf("  freeina %+v", c.FreeINA().Stats())
}

// jobSpecs returns jobs of n[i] workers each.
func jobSpecs(n []int) []JobSpec {
	js := make([]JobSpec, len(n))
	for i, w := range n {
		js[i].Workers = w
	}
	return js
}

// The trim path's acceptance tests (§1–§10 of docs/freeina.md); the UC
// path's, the default, are in freeina_uc_test.go.

// TestTrimAllReduceClean: 8 workers, 100 Gb/s, 64 values per packet, two
// all-reduces back to back.
func TestTrimAllReduceClean(t *testing.T) {
	elems := 1 << 20 // 4 MB
	if raceEnabled {
		elems = 1 << 15
	}
	c, end := runScenario(t, scenario{name: "clean", jobs: []int{8}, elems: elems, ars: 2, path: host.PathTrim})
	t.Logf("clean: %v for 2 × %d MB", end, elems*4>>20)
	logReports(t, c)
	if st := c.FreeINAPS(0).Stats(); st.Pulls != 0 || st.SoftResults != 0 {
		t.Fatalf("clean run used the fallback: %+v", st)
	}
}

// TestTrimAllReduce100MB: the 100 MB tensor, clean network, with 64
// values per packet (the default) and 256 (4 pipeline passes). Skipped
// with -short and under the race detector.
func TestTrimAllReduce100MB(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("100 MB all-reduce: skipped with -short / -race")
	}
	elems := 100 << 20 / 4
	for _, v := range []int{64, 256} {
		c, end := runScenario(t, scenario{name: "100MB", jobs: []int{8}, values: v, elems: elems, path: host.PathTrim})
		b := allReduceBound(elems, v, DefaultRate)
		t.Logf("100 MB, %d values/packet: %v, analytic bound %v, ratio %.3f", v, end, b, float64(end)/float64(b))
		logReports(t, c)
	}
}

// TestTrimFaults: exact and finishing under loss, duplication,
// reordering and a switch reboot in the middle of an all-reduce (trim
// path; TestUCAllReduceFaults runs the same matrix on the UC path).
func TestTrimFaults(t *testing.T) {
	fullSizeWithoutRace(t)
	t.Parallel() // a long test: it shares the cores with the others (make test)
	faultMatrix(t, host.PathTrim)
}

// faultMatrix runs 8 workers, 2 all-reduces, under each fault on path:
// every result exact (runScenario), a reboot that hits an all-reduce, and
// every lease ended afterwards (FREE, or the idle timeout if FREE was
// lost).
func faultMatrix(t *testing.T, path host.INAPath) {
	elems := 64 * 4000
	if raceEnabled {
		elems = 64 * 600
	}
	for _, sc := range []scenario{
		{name: "loss1", impair: emu.Impairments{Loss: 0.01}},
		{name: "loss5", impair: emu.Impairments{Loss: 0.05}},
		{name: "dup", impair: emu.Impairments{Duplicate: 0.02}},
		{name: "reorder", impair: emu.Impairments{Reorder: 0.02, ReorderDelay: 3 * time.Microsecond}},
		{name: "reboot", reboot: 100 * time.Microsecond},
		{name: "reboot+mix", reboot: 150 * time.Microsecond, impair: emu.Impairments{Loss: 0.01, Duplicate: 0.01,
			Reorder: 0.01, ReorderDelay: time.Microsecond}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			sc.jobs, sc.elems, sc.ars, sc.path = []int{8}, elems, 2, path
			if raceEnabled {
				sc.reboot /= 4
			}
			c, end := runScenario(t, sc)
			t.Logf("%v %s: %v", path, sc.name, end)
			logReports(t, c)
			if sc.reboot > 0 {
				st := c.FreeINAPS(0).Stats()
				if c.Reboots() != 1 || st.SoftResults == 0 || st.Reallocs == 0 {
					t.Fatalf("the reboot did not hit an all-reduce: %+v", st)
				}
			}
			if _, err := c.Net.RunUntil(end + 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if ls := c.FreeINA().Leases(); len(ls) != 0 {
				t.Fatalf("leases left: %+v", ls)
			}
		})
	}
}

// TestTrimMultiJob: three jobs (8, 4 and 6 workers) on one switch, each with
// its PS,
// with switch memory for fewer aggregators than they ask for: partial and
// zero grants, and PS-path chunks, stay exact (trim path; TestUCMultiJob
// runs it on the UC path).
func TestTrimMultiJob(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	multiJob(t, host.PathTrim)
}

func multiJob(t *testing.T, path host.INAPath) {
	elems := 64 * 3000
	if raceEnabled {
		elems = 64 * 500
	}
	c, end := runScenario(t, scenario{name: path.String() + "-multijob", jobs: []int{8, 4, 6}, elems: elems, ars: 3, slots: 300, path: path})
	t.Logf("%v, 3 jobs: %v", path, end)
	soft := uint64(0)
	for j := range c.Workers {
		ps := c.FreeINAPS(c.PSOf(j))
		t.Logf("  job %d plans %+v φ=%.3f", j+1, ps.Plans(uint16(j+1)), ps.Phi(uint16(j+1)))
		soft += ps.Stats().SoftResults
	}
	logReports(t, c)
	fs := c.FreeINA().Stats()
	if fs.Partial+fs.Zero == 0 {
		t.Fatalf("memory was never short: %+v", fs)
	}
	if soft == 0 {
		t.Fatal("no chunk took the PS path")
	}
}

// TestTrimDeterministic: the same seed gives the same run (trim path;
// TestUCDeterministic: UC path).
func TestTrimDeterministic(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	deterministic(t, host.PathTrim)
}

func deterministic(t *testing.T, path host.INAPath) {
	sc := scenario{name: path.String() + "-det", jobs: []int{4}, elems: 64 * 500, ars: 2, path: path,
		impair: emu.Impairments{Loss: 0.02, Reorder: 0.01, ReorderDelay: time.Microsecond}}
	c1, e1 := runScenario(t, sc)
	c2, e2 := runScenario(t, sc)
	if e1 != e2 || c1.FreeINAPS(0).Stats() != c2.FreeINAPS(0).Stats() {
		t.Fatalf("runs differ: %v %v\n%+v\n%+v", e1, e2, c1.FreeINAPS(0).Stats(), c2.FreeINAPS(0).Stats())
	}
}

// TestFreeINAExponentMode: SwitchML-like per-packet exponents, on both INA
// paths. Every worker uses the same per-chunk exponents (derived here from
// a bound all of them know); results are exact in int32 and within
// N·2^-(B−e+1) of the float sum after dequantization.
func TestFreeINAExponentMode(t *testing.T) {
	const n, elems = 4, 64 * 300
	inputs := make([][]float32, n)
	bound := make([]float32, elems)
	for r := range inputs {
		inputs[r] = genTensor(1, r, elems, 3)
		for i := range inputs[r] {
			inputs[r][i] *= float32(math.Ldexp(1, i/64%40-20)) // magnitudes 2^-20 … 2^19 by chunk
			bound[i] = float32(math.Max(float64(bound[i]), math.Abs(float64(inputs[r][i]))))
		}
	}
	exps := host.ExponentsFrom(bound, 64, 0)
	for _, path := range []host.INAPath{host.PathUC, host.PathTrim} {
		t.Run(path.String(), func(t *testing.T) {
			cfg := Spec{Seed: 3, Jobs: jobSpecs([]int{n}), INAPath: path, Quant: host.Quantizer{Mode: host.QuantExponent}}
			c, err := Build(cfg, "freeina", func(job, rank int) []host.Tensor {
				return []host.Tensor{{AllReduce: 1, Data: inputs[rank], Exps: exps}}
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Run(time.Second, 0); err != nil {
				t.Fatal(err)
			}
			// Trimmed notices reach the PS on the trim path only.
			if a := c.FreeINAPS(0).Stats().Absorbed; (a == 0) != (path == host.PathUC) {
				t.Fatalf("%s path: the PS saw %d absorbed notices", path, a)
			}
			q := host.Quantizer{Mode: host.QuantExponent, Workers: n}
			for r := range c.Workers[0] {
				w := c.FreeINAWorker(0, r)
				got, deq := w.Result(0), w.Dequantized(0)
				for i := 0; i < elems; i++ {
					e := exps[i/64]
					s := math.Ldexp(1, q.Headroom()-int(e))
					var ref int64
					var sum float64
					for k := 0; k < n; k++ {
						ref += int64(math.RoundToEven(float64(inputs[k][i]) * s))
						sum += float64(inputs[k][i])
					}
					if int64(got[i]) != ref {
						t.Fatalf("worker %d value %d: %d want %d", r, i, got[i], ref)
					}
					if w.ResultExps(0)[i/64] != e {
						t.Fatalf("result exponent %d want %d", w.ResultExps(0)[i/64], e)
					}
					if d := math.Abs(deq[i] - sum); d > q.Bound(e) {
						t.Fatalf("value %d: error %g > %g", i, d, q.Bound(e))
					}
				}
				if w.Reports()[0].Clipped != 0 {
					t.Fatal("clipped")
				}
			}
		})
	}
}

// TestPSCapacity: the path control's estimate of the PS path, as a multiple
// of a worker link: the PS link's rate, or the PS CPU's where lower.
func TestPSCapacity(t *testing.T) {
	s := Spec{LinkBitsPerSecond: 100e9, PSLinkBitsPerSecond: 400e9, ValuesPerPacket: 64}
	if c := psCapacity(&s); c != 4 {
		t.Fatalf("400 Gb/s PS link: %v", c)
	}
	// One core at 10 Gb/s of frame bytes: a tenth of a 100 Gb/s link's
	// chunks, less the preamble and gap the link also carries.
	s.PSCPU = nodes.CPUConfig{Cores: 1, BitsPerSecond: 10e9}
	frame := float64(ChunkWireBytes(64) - DefaultOverhead)
	want := 0.1 * float64(ChunkWireBytes(64)) / frame
	if c := psCapacity(&s); math.Abs(c-want) > 1e-3 {
		t.Fatalf("one 10 Gb/s core: %v, want %v", c, want)
	}
	s.PSCPU.Cores = 100 // the link binds again
	if c := psCapacity(&s); c != 4 {
		t.Fatalf("100 cores: %v", c)
	}
}
