package run

import (
	"os"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// TestAllReduceIDsWrap: a job of more than 65,535 all-reduces (their ids
// wrap to 1) gets exact sums under every policy; before the ATP/ESA PS
// dropped finished all-reduces, it answered all-reduce 65,536 with
// all-reduce 1's stored result. INABOX_LONG=1 (make soak): 70,000
// one-chunk all-reduces take about 17 s per policy.
func TestAllReduceIDsWrap(t *testing.T) {
	if os.Getenv("INABOX_LONG") == "" {
		t.Skip("70,000 all-reduces per policy, about 17 s each: INABOX_LONG=1 (make soak); the PS's part is TestPSRetiresAllReduces (host/baseline)")
	}
	src := `name: wrap
time_limit: 7000s
scaling: {tensor_scale: 0.00001, rate_scale: 1}
topology: {link_delay: 1us}
jobs:
  - {name: a, model: resnet50, workers: 2, iterations: 14000, bucket_mib: 0.0015}
`
	s, err := scenario.Parse("wrap.yaml", []byte(src), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range testbed.Names() {
		r, err := Run(s, Options{Policy: p})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if j := r.Jobs[0]; !j.Finished || j.Iterations != 14000 {
			t.Errorf("%s: finished %v after %d iterations (5 all-reduces each), want 14000", p, j.Finished, j.Iterations)
		}
	}
}
