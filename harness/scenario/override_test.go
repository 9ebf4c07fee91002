package scenario

import (
	"strconv"
	"strings"
	"testing"
)

func TestOverride(t *testing.T) {
	src := []byte("name: x\ntopology:\n  link_gbps: 100\n  switch: {slots: 4096}\njobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\n  - {name: b, model: vgg11, workers: 2, iterations: 1}\n")
	for _, c := range []struct{ path, value string }{
		{"topology.link_gbps", "10"},           // an existing value
		{"topology.switch.slots", "512"},       // inside a flow mapping
		{"topology.software_stack.gbps", "46"}, // a missing mapping, created
		{"topology.ps.cpu.per_packet", "2us"},  // two levels created
		{"jobs[1].workers", "4"},               // a list item
		{"seed", "7"},                          // a missing top-level value
	} {
		out, err := Override(src, c.path, c.value)
		if err != nil {
			t.Fatalf("%s=%s: %v", c.path, c.value, err)
		}
		s, err := Parse("x.yaml", out, DefaultModels())
		if c.path == "topology.ps.cpu.per_packet" {
			if err == nil || !strings.Contains(err.Error(), "topology.ps.cpu.cores") {
				t.Errorf("a CPU without cores: error %v, want one naming topology.ps.cpu.cores", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s=%s: %v\n%s", c.path, c.value, err, out)
		}
		got := map[string]string{
			"topology.link_gbps":           strconv.FormatFloat(s.Topology.LinkGbps, 'g', -1, 64),
			"topology.switch.slots":        strconv.Itoa(s.Topology.Switch.Slots),
			"topology.software_stack.gbps": strconv.FormatFloat(s.Topology.SoftwareStack.Gbps, 'g', -1, 64),
			"jobs[1].workers":              strconv.Itoa(s.Jobs[1].Workers),
			"seed":                         strconv.FormatUint(s.Seed, 10),
		}[c.path]
		if c.path == "topology.ps.cpu.per_packet" {
			continue // checked by the error above: cores is missing
		}
		if got != c.value {
			t.Errorf("%s=%s: the scenario has %q", c.path, c.value, got)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"jobs[5].workers", "has no item 5"},
		{"jobs.workers", "is not a mapping"},
		{"topology", "holds a mapping"},
		{"Topology.x", "is not a field name"},
		{"nojobs[0].x", "has no list nojobs"},
	} {
		if _, err := Override(src, c.path, "1"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("set %s: error %v, want it to contain %q", c.path, err, c.want)
		}
	}
}
