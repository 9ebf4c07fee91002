package run

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// TestLazyVariant: a lazy variant's values, read from any offset and in
// any length, are the held variant's.
func TestLazyVariant(t *testing.T) {
	s := tiny(t, "")
	plans := s.Plan(scenario.DefaultModels())
	// and a job of 50,000 values, for reads of many blocks at once
	plans = append(plans, scenario.JobPlan{Elements: 50_000, Workers: 2})
	g := newTensorGen(7, s, plans)
	for job := range plans {
		held := g.variant(job, 1, 1)
		l := g.lazyVariant(job, 1, 1)
		if l.n != len(held) {
			t.Fatalf("job %d: %d lazy values, %d held", job, l.n, len(held))
		}
		for _, c := range [][2]int{{0, 1}, {0, lazyBlock}, {lazyBlock - 1, 2}, {lazyBlock, 1}, {3*lazyBlock + 5, 4000}, {len(held) - 3, 3},
			{0, 4 * lazyBlock}, {lazyBlock, 9*lazyBlock + 7}, {lazyBlock - 2, 8*lazyBlock + 4}, {7, len(held)}} {
			off, n := c[0], min(c[1], len(held)-c[0])
			got := make([]float32, n)
			l.fill(got, off)
			for i := range got {
				if got[i] != held[off+i] {
					t.Fatalf("job %d: value %d = %v lazily, %v held", job, off+i, got[i], held[off+i])
				}
			}
		}
	}
}

// TestJump: jump is lazyBlock steps of the generator, from any state
// (the seed-derived states, single bits, all ones) and chained.
func TestJump(t *testing.T) {
	walk := func(x uint64) uint64 {
		for range lazyBlock {
			x, _ = step(x)
		}
		return x
	}
	g := &tensorGen{seed: 7}
	xs := []uint64{1, 1 << 63, 0x8000_0001, ^uint64(0), g.state(0, 0, 0), g.state(3, 7, 1)}
	for _, x := range xs {
		y, z := x, x
		for k := 0; k < 5; k++ {
			y, z = jump(y), walk(z)
			if y != z {
				t.Fatalf("from %#x, jump %d: %#x, walk gives %#x", x, k+1, y, z)
			}
		}
	}
}

// TestLazyGradients: every policy gives byte-identical results.json and
// pcaps whether the gradients and reference sums are held or made on
// demand, with loss on every link (retransmitted chunks are made again),
// and with values and wire forms made ahead in spans of the default size
// and of 200 values (many spans a tensor) where the run makes them ahead.
func TestLazyGradients(t *testing.T) {
	s := tiny(t, "impairments:\n  - {link: all, loss: 0.002}\n")
	for _, p := range testbed.Names() {
		heldDir, lazyDir := t.TempDir(), t.TempDir()
		_, held := runJSON(t, s, Options{Policy: p, PcapDir: heldDir})
		restore := lazyGradients(t)
		_, lazy := runJSON(t, s, Options{Policy: p, PcapDir: lazyDir})
		if asyncCheck {
			old := aheadSpan
			aheadSpan = 200
			_, small := runJSON(t, s, Options{Policy: p})
			aheadSpan = old
			if !bytes.Equal(held, small) {
				t.Errorf("%s: results.json differs with lazy gradients made ahead in spans of 200 values", p)
			}
		}
		restore()
		if !bytes.Equal(held, lazy) {
			t.Errorf("%s: results.json differs with lazy gradients", p)
		}
		files, _ := filepath.Glob(filepath.Join(heldDir, "*.pcap"))
		if len(files) == 0 {
			t.Fatalf("%s: no pcaps", p)
		}
		for _, f := range files {
			a, _ := os.ReadFile(f)
			b, err := os.ReadFile(filepath.Join(lazyDir, filepath.Base(f)))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s: %s differs with lazy gradients (%v)", p, filepath.Base(f), err)
			}
		}
	}
}

// TestRingTooLarge: the ring, which holds each worker's whole gradient
// quantized beside its result, is refused where that passes the run-size
// bound.
func TestRingTooLarge(t *testing.T) {
	t.Setenv(scenario.RunMemoryEnv, "") // the default bound, whatever the environment says
	src := "jobs:\n  - {name: a, model: vgg16, workers: 8, iterations: 1}\n"
	s, err := scenario.Parse("big.yaml", []byte(src), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err) // 1.55 GiB of PS results: within the bound
	}
	_, err = prepare(s, Options{Policy: "none"}, false)
	if err == nil || err.Error() != "big: policy none: the ring would hold 8.25 GiB (a quantized gradient per worker and the messages queued to send it, 4 B per element each): at most 8.00 GiB; lower scaling.tensor_scale or the workers, or raise INABOX_MAX_RUN_GIB on a machine with the memory" {
		t.Fatalf("ring: %v", err)
	}
	// A machine with more memory raises the bound; a bad value is named.
	t.Setenv(scenario.RunMemoryEnv, "8.5")
	if err := gen(s).checkRing(s, "none"); err != nil {
		t.Errorf("ring at %s=8.5: %v", scenario.RunMemoryEnv, err)
	}
	t.Setenv(scenario.RunMemoryEnv, "lots")
	if err := gen(s).checkRing(s, "none"); err == nil || err.Error() != `big: INABOX_MAX_RUN_GIB="lots": want a number of GiB in (0, 1048576]` {
		t.Errorf("ring at %s=lots: %v", scenario.RunMemoryEnv, err)
	}
}

// gen is s's tensor generator at its own seed.
func gen(s *scenario.Scenario) *tensorGen {
	return newTensorGen(s.Seed, s, s.Plan(scenario.DefaultModels()))
}
