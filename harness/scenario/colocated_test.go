package scenario

import (
	"strings"
	"testing"
)

// TestCoLocatedScenarioErrors: co-located takes no PS count and no PS
// link rate.
func TestCoLocatedScenarioErrors(t *testing.T) {
	const job = "jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\n"
	for _, c := range []struct{ src, want string }{
		{"topology: {ps: {placement: co-located, count: 1}}\n" + job,
			"x.yaml:1: topology.ps.count: 1: applies to placement: shared only (placement co-located gives each job one PS)"},
		{"topology: {ps: {placement: co-located, link_gbps: 40}}\n" + job,
			"x.yaml:1: topology.ps.link_gbps: 40: does not apply to placement: co-located"},
	} {
		if _, err := Parse("x.yaml", []byte(c.src), DefaultModels()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
	s, err := Parse("x.yaml", []byte("topology: {ps: {placement: co-located}}\n"+job+"  - {name: b, model: vgg16, workers: 1, iterations: 1}\n"), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.PSNames(), ","); got != "ps0,ps1" || s.Topology.PS.LinkGbps != s.Topology.LinkGbps {
		t.Errorf("PSs %s, PS link %v Gb/s", got, s.Topology.PS.LinkGbps)
	}
}
