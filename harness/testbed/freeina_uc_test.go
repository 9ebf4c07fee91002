package testbed

import (
	"os"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// The PathUC acceptance matrix: the same scenarios as the trim path's
// (8 workers, exact int32 against runScenario's own reference, the
// dequantized bound), with INA chunks as UC datagrams the switch absorbs.

// TestUCAllReduceClean: nothing but control reaches the PS.
func TestUCAllReduceClean(t *testing.T) {
	elems := 1 << 20 // 4 MB
	if raceEnabled {
		elems = 1 << 15
	}
	c, end := runScenario(t, scenario{name: "uc-clean", jobs: []int{8}, elems: elems, ars: 2, path: host.PathUC})
	t.Logf("uc clean: %v for 2 × %d MB (%v per all-reduce bound)", end, elems*4>>20, allReduceBound(elems, 64, DefaultRate))
	logReports(t, c)
	st := c.FreeINAPS(0).Stats()
	if st.Pulls != 0 || st.SoftResults != 0 || st.Raw != 0 || st.Absorbed != 0 || st.SwitchResults != 0 {
		t.Fatalf("clean uc run sent chunks to the PS: %+v", st)
	}
	if st.AllReduces != 2 || st.Frees != 2 {
		t.Fatalf("all-reduces not finished at the PS: %+v", st)
	}
	// The PS link carried control only: BEGIN/PLAN/DONE/FREE/ALLOC/GRANT
	// and their ACKs, a few hundred bytes per worker and all-reduce.
	down, up := c.PSs[0].Link.Stats(emu.AtoB).SentBytes, c.PSs[0].Link.Stats(emu.BtoA).SentBytes
	if down+up > 64<<10 {
		t.Fatalf("PS link carried %d + %d bytes", down, up)
	}
	t.Logf("PS link: %d B down, %d B up", down, up)
	for _, w := range c.Workers[0] {
		for _, r := range w.Endpoint.Reports() {
			if r.Retransmits != 0 || r.Fallbacks != 0 || r.PSResults != 0 {
				t.Fatalf("clean uc run recovered: %+v", r)
			}
		}
	}
}

// TestUCAllReduceFaults: loss, duplication, reordering and a switch
// reboot in the middle of an all-reduce, on the UC path.
func TestUCAllReduceFaults(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	faultMatrix(t, host.PathUC)
}

// TestUCFallback: with a fallback after 2 timeouts (too eager for 1 %
// loss: one slow RC-path chunk stalls every window), many chunks take the
// RC path — PS pulls and software sums — and the results stay exact.
func TestUCFallback(t *testing.T) {
	elems := 64 * 2000
	if raceEnabled {
		elems = 64 * 400
	}
	c, end := runScenario(t, scenario{name: "uc-fallback", jobs: []int{8}, elems: elems, ars: 2, path: host.PathUC,
		impair: emu.Impairments{Loss: 0.01}, seed: 0, tune: func(cfg *Spec) {
			cfg.FreeINA = &FreeINAOptions{Worker: func(_, _ int, w *host.WorkerConfig) { w.UCRetries = 2 }}
		}})
	t.Logf("uc fallback: %v", end)
	logReports(t, c)
	fb := 0
	for _, w := range c.Workers[0] {
		for _, r := range w.Endpoint.Reports() {
			fb += r.Fallbacks
		}
	}
	if st := c.FreeINAPS(0).Stats(); fb == 0 || st.Pulls == 0 || st.SoftResults == 0 {
		t.Fatalf("no fallback: %d %+v", fb, st)
	}
}

// TestUCMultiJob: three jobs with short switch memory (partial and zero
// grants, PS-path chunks) on the UC path.
func TestUCMultiJob(t *testing.T) {
	t.Parallel() // a long test: it shares the cores with the others (make test)
	multiJob(t, host.PathUC)
}

// TestUCDeterministic: the same seed gives the same run on the UC path.
func TestUCDeterministic(t *testing.T) { deterministic(t, host.PathUC) }

// TestUC100MBFaults is the full-size acceptance: 8 workers all-reduce
// a 100 MB tensor at 100 Gb/s over the UC INA path, exact under 1% and 5%
// loss, duplication, reordering and a switch reboot mid-all-reduce. It takes
// minutes, so it runs with INABOX_LONG=1 (make soak); the suite runs the same
// matrix at 1 MB (TestUCAllReduceFaults).
func TestUC100MBFaults(t *testing.T) {
	if os.Getenv("INABOX_LONG") == "" || raceEnabled {
		t.Skip("100 MB fault matrix: set INABOX_LONG=1 (without -race)")
	}
	elems := 100 << 20 / 4
	for _, sc := range []scenario{
		{name: "clean"},
		{name: "loss1", impair: emu.Impairments{Loss: 0.01}},
		{name: "loss5", impair: emu.Impairments{Loss: 0.05}},
		{name: "dup", impair: emu.Impairments{Duplicate: 0.02}},
		{name: "reorder", impair: emu.Impairments{Reorder: 0.02, ReorderDelay: 3 * time.Microsecond}},
		{name: "reboot", reboot: 3 * time.Millisecond},
	} {
		t.Run(sc.name, func(t *testing.T) {
			sc.jobs, sc.elems, sc.path, sc.deadline = []int{8}, elems, host.PathUC, 20*time.Second
			c, end := runScenario(t, sc)
			b := allReduceBound(elems, 64, DefaultRate)
			t.Logf("uc 100 MB %s: %v, analytic bound %v, ratio %.3f", sc.name, end, b, float64(end)/float64(b))
			if sc.reboot > 0 && c.Reboots() != 1 {
				t.Fatalf("the reboot did not happen")
			}
		})
	}
}

// TestUCAdaptiveTimeout: with a configured UC timeout far below the real
// round trip (as when processes run late in real time), an adaptive
// worker's round-trip estimate lifts its retransmission timeout: only the chunks
// sent before the first results came back are resent, not every chunk
// (with the configured 1 µs alone every chunk would be resent at least
// once).
func TestUCAdaptiveTimeout(t *testing.T) {
	// The learning costs about two windows of resends whatever the size;
	// 4000 chunks a worker make that small (also under -race: ~2 s).
	elems := 64 * 4000
	sc := scenario{name: "uc-rto", jobs: []int{4}, elems: elems, ars: 2, path: host.PathUC,
		tune: func(c *Spec) {
			c.FreeINA = &FreeINAOptions{Worker: func(_, _ int, w *host.WorkerConfig) { w.UCTimeout, w.AdaptUCTimeout = time.Microsecond, true }}
		}}
	c, end := runScenario(t, sc)
	t.Logf("uc with a 1 µs configured timeout: %v", end)
	chunks := elems / 64
	for r := range c.Workers[0] {
		w := c.FreeINAWorker(0, r)
		retx := 0
		for _, rep := range w.Reports() {
			retx += rep.Retransmits
			if rep.Fallbacks != 0 {
				t.Errorf("worker %d fell back to RC: %+v", r, rep)
			}
		}
		if retx >= chunks/4 {
			t.Errorf("worker %d resent %d of 2 × %d UC contributions: the timeout did not adapt", r, retx, chunks)
		}
		rto, srtt, rttvar, ok := w.UCRTO()
		if !ok || rto <= time.Microsecond {
			t.Errorf("worker %d: RTO %v (srtt %v, rttvar %v)", r, rto, srtt, rttvar)
		}
		t.Logf("worker %d: %d resent, srtt %v rttvar %v → RTO %v", r, retx, srtt, rttvar, rto)
	}
}
