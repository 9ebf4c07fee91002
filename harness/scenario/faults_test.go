package scenario

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestPresets: the docs' example: an entry starts from its preset (which
// may extend another), the fields it gives win, and a direction set by a
// preset holds.
func TestPresets(t *testing.T) {
	s, err := Parse("x.yaml", []byte(`jobs:
  - {name: a, model: resnet50, workers: 4, iterations: 1}
presets:
  noisy-uplink: {preset: lossy, corrupt: 0.0001, direction: up}
impairments:
  - {link: all, preset: bursty}
  - {link: h3, preset: noisy-uplink, loss: 0.01}
`), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	up, down := s.LinkConfig("h3", DirUp), s.LinkConfig("h3", DirDown)
	if up.Impairments.Loss != 0.01 || up.Impairments.Corrupt != 0.0001 || up.Impairments.GilbertElliott != nil {
		t.Errorf("h3 up: %+v, want the entry's loss and the preset's corruption only", up.Impairments)
	}
	ge := down.Impairments.GilbertElliott
	if down.Impairments.Loss != 0 || ge == nil || ge.LossBad != 1 || ge.PBadToGood != 1.0/8 {
		t.Errorf("h3 down: %+v (%+v), want all's bursty loss", down.Impairments, ge)
	}
	// the bad state's long-run share is the rate
	if share := ge.PGoodToBad / (ge.PGoodToBad + ge.PBadToGood); share < 0.000999 || share > 0.001001 {
		t.Errorf("bursty loss rate %v, want 0.001", share)
	}
	h0 := s.LinkConfig("h0", DirUp)
	if h0.Impairments.GilbertElliott == nil {
		t.Error("h0: no bursty loss from all")
	}
	s, err = Parse("x.yaml", []byte(`jobs:
  - {name: a, model: resnet50, workers: 2, iterations: 1}
impairments:
  - {link: h1, preset: flapping, direction: down}
  - {link: h0, burst_loss: {p_good_to_bad: 0.01, p_bad_to_good: 0.5}}
`), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if f := s.ImpairmentOf("h1", DirDown).Flap; f == nil || f.MeanUp.D() != 20*time.Millisecond {
		t.Errorf("flapping preset: %+v", f)
	}
	if s.ImpairmentOf("h1", DirUp) != nil {
		t.Error("h1 up is impaired")
	}
	if ge := s.LinkConfig("h0", DirDown).Impairments.GilbertElliott; ge == nil || ge.LossBad != 1 || ge.LossGood != 0 || ge.PGoodToBad != 0.01 {
		t.Errorf("burst_loss by probabilities: %+v, want loss_bad defaulting to 1", ge)
	}
}

// TestDocSnippets: every YAML example of README.md and docs/scenarios.md
// that has no jobs of its own is valid with the default scenario's two jobs
// (resnet50 and vgg11, two workers each).
func TestDocSnippets(t *testing.T) {
	const jobs = "jobs:\n  - {name: resnet50, model: resnet50, workers: 2, iterations: 3}\n  - {name: vgg11, model: vgg11, workers: 2, iterations: 3}\n"
	n := 0
	for _, f := range []string{"../../README.md", "../../docs/scenarios.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
			src, _, _ := strings.Cut(block, "```")
			if strings.Contains(src, "jobs:") {
				continue
			}
			n++
			if _, err := Parse(f+".yaml", []byte(jobs+src), DefaultModels()); err != nil {
				t.Errorf("%s: example\n%s: %v", f, src, err)
			}
		}
	}
	if n < 3 {
		t.Errorf("only %d examples found", n)
	}
}

// TestPresetsFile: presets from presets_file are used and extended like
// the scenario's own, which replace one of the same name; a bad preset in
// the file is an error naming the file, the line and the field.
func TestPresetsFile(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(dir+"/site.yaml", []byte("dc-uplink: {preset: lossy, corrupt: 0.001, direction: up}\nflaky: {loss: 0.2}\n"), 0o644))
	sc := dir + "/s.yaml"
	must(os.WriteFile(sc, []byte(`presets_file: site.yaml
presets:
  flaky: {loss: 0.05}
jobs:
  - {name: a, model: resnet50, workers: 2, iterations: 1}
impairments:
  - {link: h0, preset: dc-uplink}
  - {link: h1, preset: flaky}
`), 0o644))
	b, _ := os.ReadFile(sc)
	s, err := Parse(sc, b, DefaultModels())
	must(err)
	if im := s.LinkConfig("h0", DirUp).Impairments; im.Loss != 0.001 || im.Corrupt != 0.001 {
		t.Errorf("h0 up: %+v, want the file's preset over lossy", im)
	}
	if s.ImpairmentOf("h0", DirDown) != nil {
		t.Error("h0 down impaired: the file's preset is up only")
	}
	if im := s.LinkConfig("h1", DirUp).Impairments; im.Loss != 0.05 {
		t.Errorf("h1: loss %v, want the scenario's own flaky (0.05) over the file's", im.Loss)
	}
	must(os.WriteFile(dir+"/site.yaml", []byte("dc-uplink: {preset: lossy}\nbad:\n  loss: 3\n"), 0o644))
	_, err = Parse(sc, b, DefaultModels())
	if err == nil || !strings.Contains(err.Error(), "site.yaml:3: bad.loss: 3: must be a probability") {
		t.Errorf("bad preset in the file: %v", err)
	}
}
