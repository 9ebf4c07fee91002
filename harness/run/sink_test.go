package run

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/host"
)

// TestResultCheck: results checked chunk by chunk as they are stored
// (resultCheck) judge as a whole result's check does, whatever the order
// the workers store their chunks in, whether the reference is held or made
// a block at a time (lazy: blocks of 3 chunks here, so that a result spans
// several), and a lazy job's reference blocks are let go once every worker
// has stored them.
func TestResultCheck(t *testing.T) {
	t.Run("held", testResultCheck)
	t.Run("lazy", func(t *testing.T) {
		lazyGradients(t)
		old := refBlockElems
		refBlockElems = 3 * 5 // 3 chunks of 5 values
		t.Cleanup(func() { refBlockElems = old })
		testResultCheck(t)
	})
}

func testResultCheck(t *testing.T) {
	s := tiny(t, "")
	plans := s.Plan(scenario.DefaultModels())
	const job, k, values = 1, 0, 5
	ref := newTensorGen(1, s, plans).reference(job, k)
	if len(ref)%values == 0 {
		t.Fatalf("want a last chunk shorter than the others: %d elements", len(ref))
	}
	chunks := (len(ref) + values - 1) / values
	g := newTensorGen(1, s, plans)
	rng := rand.New(rand.NewPCG(1, 2))
	// store feeds res, worker rank's result, chunk by chunk in a random
	// order, and checks that its chunks' reference blocks are let go
	// once the last worker has stored them (want: blocks still held after).
	store := func(c *resultCheck, rank int, res []int32) {
		for _, ch := range rng.Perm(chunks) {
			lo := ch * values
			c.chunk(rank, k, uint32(ch), res[lo:min(lo+values, len(res))])
		}
	}
	run := func(results ...[]int32) error {
		c := newResultCheck(g, job, values)
		c.workers = len(results)
		for r, res := range results {
			store(c, r, res)
		}
		if a := c.ars[k]; len(a.blocks) != 0 {
			t.Fatalf("%d reference blocks held after every worker stored every chunk", len(a.blocks))
		}
		ds, gots, stored, n := c.end(k)
		if len(c.ars) != 0 {
			t.Fatal("the all-reduce is still held after its end")
		}
		for r := range results {
			if stored[r] != n {
				return fmt.Errorf("worker %d: %d of %d chunks", r, stored[r], n)
			}
			if d := ds[r]; d.bad > 0 {
				return fmt.Errorf("worker %d: %d wrong, element %d = %d, want %d", r, d.bad, d.first, gots[r], d.want)
			}
		}
		return nil
	}
	good := append([]int32(nil), ref...)
	if err := run(good, good, good); err != nil {
		t.Fatal(err)
	}
	bad := append([]int32(nil), ref...)
	bad[len(bad)/2]++
	bad[len(bad)-1]--
	bad[3] += 7
	want := fmt.Sprintf("worker 1: 3 wrong, element 3 = %d, want %d", bad[3], ref[3])
	if err := run(good, bad); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	// a chunk never stored, a chunk stored twice (after its block is gone)
	c := newResultCheck(g, job, values)
	c.workers = 2
	store(c, 0, good)
	for ch := 1; ch < chunks; ch++ {
		c.chunk(1, k, uint32(ch), good[ch*values:min(ch*values+values, len(good))])
	}
	c.chunk(0, k, 0, good[:values])
	wrong := append([]int32(nil), good[values:2*values]...)
	wrong[1]++
	c.chunk(0, k, 1, wrong)
	ds, _, stored, n := c.end(k)
	if stored[0] != n || stored[1] != n-1 || ds[0].bad != 1 || ds[0].first != 6 || ds[1].bad != 0 {
		t.Fatalf("stored %v of %d, diffs %+v", stored, n, ds)
	}
}

// TestRunCheckAsStored: a run checks each chunk its workers store, and a
// wrong one fails the run, naming the worker, the element and both values,
// whether a lazy job's checks run on the emulator's goroutine or on their
// own; a good run's results are the same either way.
func TestRunCheckAsStored(t *testing.T) {
	for _, c := range []struct {
		lazy, async bool
	}{{false, false}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("lazy=%v,async=%v", c.lazy, c.async), func(t *testing.T) {
			if c.lazy {
				lazyGradients(t)
			}
			old, oldValues := asyncCheck, asyncBatchValues
			asyncCheck, asyncBatchValues = c.async, 300 // a batch every few chunks
			t.Cleanup(func() { asyncCheck, asyncBatchValues = old, oldValues })
			s := tiny(t, "")
			r, err := prepare(s, Options{Policy: "freeina"}, c.async)
			if err != nil {
				t.Fatal(err)
			}
			r.checkAsStored(asyncCheck)
			defer r.stopChecks()
			if (r.async != nil) != c.async {
				t.Fatalf("checks on a goroutine of their own: %v, want %v", r.async != nil, c.async)
			}
			w := r.tb.Workers[1][1].Endpoint
			w.SetResultSink(flipSink{r.sink(1, 1), 2, 3})
			r.ctx = t.Context()
			_, err = r.run(r.step, noProgress{})
			ref := make([]int32, 3*w.Values())
			r.gen.refInto(1, 0, 0, ref, &refScratch{})
			e := 2*w.Values() + 3
			want := fmt.Sprintf("job resnet worker 1 iteration 0: element %d = %d, want %d (wrong all-reduce sum)", e, ref[e]+1, ref[e])
			if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, ErrUnfinished) {
				t.Fatalf("got %v, want %q", err, want)
			}
		})
	}
	var outs []string
	for _, async := range []bool{false, true} {
		lazyGradients(t)
		old, oldValues := asyncCheck, asyncBatchValues
		asyncCheck, asyncBatchValues = async, 300
		_, b := runJSON(t, tiny(t, ""), Options{Policy: "atp"})
		asyncCheck, asyncBatchValues = old, oldValues
		outs = append(outs, string(b))
	}
	if outs[0] != outs[1] {
		t.Fatal("results.json differs with the checks on a goroutine of their own")
	}
}

// flipSink passes chunks on with value v of chunk k one more.
type flipSink struct {
	host.ResultSink
	k uint32
	v int
}

func (f flipSink) ResultChunk(i int, k uint32, vals []int32, e int8) {
	if i == 0 && k == f.k {
		vals[f.v]++
	}
	f.ResultSink.ResultChunk(i, k, vals, e)
}
