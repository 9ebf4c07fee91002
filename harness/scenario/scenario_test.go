package scenario

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/testbed"
	"github.com/inabox/inabox/testdata"
)

func TestInvalidScenarios(t *testing.T) {
	t.Setenv(RunMemoryEnv, "") // the default bound, whatever the environment says
	ents, err := fs.ReadDir(testdata.Scenarios, "scenarios/invalid")
	if err != nil || len(ents) < 5 {
		t.Fatalf("invalid scenarios: %d, %v", len(ents), err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue // a trace one of them names
		}
		t.Run(e.Name(), func(t *testing.T) {
			data, err := fs.ReadFile(testdata.Scenarios, "scenarios/invalid/"+e.Name())
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("first line %q is not a '# want: ' comment", first)
			}
			_, err = Embedded("invalid/" + e.Name())
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, want)
			}
			var se *Error
			if !errors.As(err, &se) || len(se.Errs) == 0 {
				t.Errorf("error %T is not a *Error", err)
			}
		})
	}
}

func isLanguage(m string) bool { return strings.HasPrefix(m, "bert") || strings.HasPrefix(m, "gpt") }

func TestEmbeddedScenarios(t *testing.T) {
	names := EmbeddedNames()
	for _, want := range []string{DefaultName, "dynaina-contention.yaml", "freeina-single.yaml", "freeina-multi.yaml"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("scenario %s not embedded (have %v)", want, names)
		}
	}
	ms := DefaultModels()
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			s, err := Embedded(n)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name+".yaml" != n {
				t.Errorf("name %q in file %s", s.Name, n)
			}
			// The same file on disk and embedded.
			disk, err := Load(filepath.Join("..", "..", "testdata", "scenarios", n))
			if err != nil || disk.Name != s.Name {
				t.Errorf("disk copy: %v", err)
			}
			// Cost budget: each finishes within 10 minutes on 2 cores; the
			// emulator moves a few M packet events per second, and a worker
			// packet makes about 3 + workers of them.
			e := s.Estimate(ms)
			if e.WorkerPackets > 3_000_000 {
				t.Errorf("estimate %d worker packets: over the 3 M budget", e.WorkerPackets)
			}
			if e.VirtualTime <= 0 || e.VirtualTime > s.TimeLimit.D()/2 {
				t.Errorf("virtual-time lower bound %v vs time_limit %v", e.VirtualTime, s.TimeLimit)
			}
			// Equal scales: comm/compute ratios of the unscaled network.
			for _, p := range s.Plan(ms) {
				full := p.Model.CommRatio(s.Topology.LinkGbps*1e9, WireEfficiency(s.Topology.Switch.ValuesPerPacket, INAHeaderBytes))
				if p.CommRatio < full*0.98 || p.CommRatio > full*1.02 {
					t.Errorf("job %s: scaled comm ratio %.4f, unscaled %.4f", p.Name, p.CommRatio, full)
				}
			}
		})
	}
	s, err := Embedded("dynaina-contention.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vision, lang := 0, 0
	arrivals := map[time.Duration]bool{}
	for _, j := range s.Jobs {
		if isLanguage(j.Model) {
			lang++
		} else {
			vision++
		}
		arrivals[j.Arrival.D()] = true
	}
	if n := len(s.Jobs); n < 4 || n > 8 || vision == 0 || lang == 0 || len(arrivals) < 4 {
		t.Errorf("dynaina-contention: %d jobs, %d vision, %d language, %d distinct arrivals", n, vision, lang, len(arrivals))
	}
	if s.Policy != "dynaina" {
		t.Errorf("policy %s", s.Policy)
	}
	for _, n := range []string{"freeina-single.yaml", "freeina-multi.yaml"} {
		s, err := Embedded(n)
		if err != nil || s.Policy != "freeina" {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func TestScenarioDefaults(t *testing.T) {
	s, err := Parse("dir/my-exp.yaml", []byte("jobs:\n  - {name: a, model: resnet50, workers: 3, iterations: 2}\n  - {name: b, model: bert-base, workers: 2, iterations: 1, arrival: 5ms, comm_ratio: 0.5}\n"), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "my-exp" || s.Seed != DefaultSeed || s.Policy != DefaultPolicy || s.TimeLimit.D() != DefaultTimeLimit ||
		s.Scaling != (Scaling{1, 1}) || s.Topology.LinkGbps != 100 || s.Topology.LinkDelay.D() != time.Microsecond ||
		s.Topology.Switch.Slots != 16384 || s.Topology.Switch.ValuesPerPacket != 64 || s.Topology.Switch.PassTime.D() != time.Nanosecond ||
		s.Topology.PS.Placement != PlacementDedicated || s.Topology.PS.Count != 2 || s.Topology.PS.LinkGbps != 100 || s.File() != "dir/my-exp.yaml" {
		t.Errorf("defaults: %+v", s)
	}
	if got := s.HostNames(); len(got) != 5 || got[4] != "h4" {
		t.Errorf("hosts %v", got)
	}
	if s.LinkBitsPerSecond() != 100e9 || s.PSLinkBitsPerSecond() != 100e9 {
		t.Errorf("rates %d %d", s.LinkBitsPerSecond(), s.PSLinkBitsPerSecond())
	}
	p := s.Plan(DefaultModels())
	if strings.Join(p[0].Hosts, ",") != "h0,h1,h2" || strings.Join(p[1].Hosts, ",") != "h3,h4" || p[1].PS != "ps1" {
		t.Errorf("placement %v %v", p[0].Hosts, p[1].Hosts)
	}
	if p[0].Packets != (p[0].Elements+63)/64 || p[0].Bytes != 4*p[0].Elements || p[0].Compute != 307700*time.Microsecond {
		t.Errorf("plan %+v", p[0])
	}
	if p[1].CommRatio < 0.4999 || p[1].CommRatio > 0.5001 || p[1].Arrival != 5*time.Millisecond {
		t.Errorf("comm_ratio override: %+v", p[1])
	}
	// Explicit zero seed is kept; shared hosts wrap; shared PSs take jobs
	// round-robin.
	s, err = Parse("x.yaml", []byte("seed: 0\ntopology: {hosts: 4, ps: {placement: shared, count: 2}}\njobs:\n  - {name: a, model: resnet50, workers: 3, iterations: 2}\n  - {name: b, model: vgg16, workers: 3, iterations: 2}\n  - {name: c, model: vgg16, workers: 1, iterations: 2}\n"), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	p = s.Plan(DefaultModels())
	if s.Seed != 0 || strings.Join(p[1].Hosts, ",") != "h3,h0,h1" || p[1].PS != "ps1" || p[2].PS != "ps0" || len(s.PSNames()) != 2 {
		t.Errorf("seed %d, placement %v %s %s, PSs %v", s.Seed, p[1].Hosts, p[1].PS, p[2].PS, s.PSNames())
	}
}

func TestScenarioErrors(t *testing.T) {
	t.Setenv(RunMemoryEnv, "") // the default bound, whatever the environment says
	const job = "jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\n"
	cases := []struct{ name, src, want string }{
		{"workers high", "jobs:\n  - {name: a, model: resnet50, workers: 33, iterations: 1}\n", "x.yaml:2: jobs[0].workers: 33: must be between 1 and 32"},
		{"iterations", "jobs:\n  - {name: a, model: resnet50, workers: 1, iterations: 0}\n", "jobs[0].iterations: 0: must be between 1 and 1000000"},
		{"bad name", "jobs:\n  - {name: 'a b', model: resnet50, workers: 1, iterations: 1}\n", `jobs[0].name: "a b": must match`},
		{"arrival", "time_limit: 1s\njobs:\n  - {name: a, model: resnet50, workers: 1, iterations: 1, arrival: 2s}\n", "x.yaml:3: jobs[0].arrival: 2s: must be in [0, time_limit)"},
		{"priority", "jobs:\n  - {name: a, model: resnet50, workers: 1, iterations: 1, priority: 300}\n", "jobs[0].priority: 300: must be between 0 and 255"},
		{"comm ratio zero", "jobs:\n  - {name: a, model: resnet50, workers: 1, iterations: 1, comm_ratio: 0}\n", "jobs[0].comm_ratio: 0: must be in [0.001, 1000]"},
		{"link rate", "topology: {link_gbps: 0}\n" + job, "x.yaml:1: topology.link_gbps: 0: must be in (0, 1600]"},
		{"link delay", "topology: {link_delay: -1us}\n" + job, "topology.link_delay: -1us: must be in [0, 1s]"},
		{"slots", "topology: {switch: {slots: 70000}}\n" + job, "topology.switch.slots: 70000: must be between 1 and 65536"},
		{"values", "topology: {switch: {values_per_packet: 2000}}\n" + job, "topology.switch.values_per_packet: 2000: must be between 1 and 1024"},
		{"ps count", "topology: {ps: {placement: shared, count: 0}}\n" + job, "topology.ps.count: 0: must be between 1 and 64"},
		{"ps count dedicated", "topology: {ps: {count: 2}}\n" + job, "x.yaml:1: topology.ps.count: 2: applies to placement: shared only"},
		{"ps placement", "topology: {ps: {placement: everywhere}}\n" + job, `topology.ps.placement: "everywhere": must be dedicated`},
		{"ps rate", "topology: {ps: {link_gbps: -5}}\n" + job, "topology.ps.link_gbps: -5: must be in (0, 1600]"},
		{"stack rate", "topology: {software_stack: {gbps: -1}}\n" + job, "topology.software_stack.gbps: -1: must be in [0, 1600]"},
		{"atp window", "atp: {window: -3}\n" + job, "x.yaml:1: atp.window: -3: must be 0 (no cap)"},
		{"atp budget", "atp: {budget: -1}\n" + job, "x.yaml:1: atp.budget: -1: must be 0 (no budget: the whole pool)"},
		{"atp first wait", "atp: {first_wait: -5ms}\n" + job, "x.yaml:1: atp.first_wait: -5ms: must be in [0, 1h]"},
		{"atp first wait unit", "atp: {first_wait: 5}\n" + job, "x.yaml:1: atp.first_wait: 5: want a Go duration"},
		{"atp budget memory", "atp: {budget: 600}\ntopology: {switch: {slots: 2048, values_per_packet: 256}}\n" + job,
			"x.yaml:1: atp.budget: 600: must be at most the switch's 512 aggregators (topology.switch.slots / 4 slots per aggregator)"},
		{"esa reclaim_held", "esa: {reclaim_held: sometimes}\n" + job, "x.yaml:1: esa.reclaim_held: sometimes: want"},
		{"esa unknown", "esa: {reclaim: true}\n" + job, "x.yaml:1: esa.reclaim: unknown field; known: reclaim_held"},
		{"stack latency", "topology: {software_stack: {latency: 2s}}\n" + job, "topology.software_stack.latency: 2s: must be in [0, 1s]"},
		{"rate scale", "scaling: {rate_scale: 0}\n" + job, "scaling.rate_scale: 0: must be in (0, 1]"},
		{"time limit", "time_limit: 0s\n" + job, "time_limit: 0s: must be > 0"},
		{"fault kind", job + "faults:\n  - {at: 1ms, kind: meteor, target: h0}\n", `x.yaml:4: faults[0].kind: "meteor": must be one of link_down, link_up`},
		{"fault at", "time_limit: 1s\n" + job + "faults:\n  - {at: 2s, kind: link_down, target: h0}\n", "faults[0].at: 2s: must be in [0, time_limit)"},
		{"link_up duration", job + "faults:\n  - {at: 1ms, kind: link_up, target: h0, duration: 1ms}\n", "faults[0].duration: 1ms: link_up takes no duration"},
		{"link_down value", job + "faults:\n  - {at: 1ms, kind: link_down, target: ps0, value: 3}\n", "faults[0].value: 3: link_down takes no value"},
		{"delay spike", job + "faults:\n  - {at: 1ms, kind: delay_spike, target: h1, duration: 1ms}\n", "faults[0].value: 0: delay_spike needs the extra delay in µs"},
		{"corrupt duration", job + "faults:\n  - {at: 1ms, kind: corrupt, target: h1, value: 0.1}\n", "faults[0].duration: 0s: corrupt needs a duration > 0"},
		{"reboot target", job + "faults:\n  - {at: 1ms, kind: switch_reboot, target: h0}\n", `faults[0].target: "h0": must be "sw"`},
		{"crash target", job + "faults:\n  - {at: 1ms, kind: node_crash, target: sw}\n", `faults[0].target: "sw": must name a host`},
		{"impairment link", job + "impairments:\n  - {link: h7, loss: 0.1}\n", `impairments[0].link: "h7": must name a link`},
		{"impairment prob", job + "impairments:\n  - {link: all, duplicate: 1.1}\n", "x.yaml:4: impairments[0].duplicate: 1.1: must be a probability in [0, 1]"},
		{"impairment dup", job + "impairments:\n  - {link: h0, loss: 0.1}\n  - {link: h0}\n", `impairments[1].link: "h0": duplicate: impairments[0] already sets this link's up direction`},
		{"impairment dir overlap", job + "impairments:\n  - {link: h0, loss: 0.1, direction: down}\n  - {link: h0, direction: both}\n", `impairments[1].link: "h0": duplicate: impairments[0] already sets this link's down direction`},
		{"impairment direction", job + "impairments:\n  - {link: h0, direction: sideways}\n", `impairments[0].direction: "sideways": must be both`},
		{"burst loss both forms", job + "impairments:\n  - {link: h0, burst_loss: {rate: 0.01, mean_burst: 4, p_bad_to_good: 0.5}}\n", "impairments[0].burst_loss.rate: 0.01: give rate and mean_burst, or"},
		{"burst loss short", job + "impairments:\n  - {link: h0, burst_loss: {rate: 0.01, mean_burst: 0.5}}\n", "impairments[0].burst_loss.mean_burst: 0.5: must be the mean burst length"},
		{"burst loss empty", job + "impairments:\n  - {link: h0, burst_loss: {}}\n", "impairments[0].burst_loss: \"{}\": give rate and mean_burst"},
		{"preset unknown", job + "impairments:\n  - {link: h0, preset: swampy}\n", `x.yaml:4: impairments[0].preset: "swampy": not a preset: want one of bursty, corrupting, flapping, jittery, lossy`},
		{"preset cycle", job + "presets:\n  a: {preset: b}\n  b: {preset: a}\nimpairments:\n  - {link: h0, preset: a}\n", "presets extend each other in a cycle: a → b → a"},
		{"preset link", job + "presets:\n  a: {link: h0, loss: 0.1}\n", `presets.a.link: "h0": a preset names no link`},
		{"preset value", job + "presets:\n  a: {preset: lossy, loss: 2}\n", "x.yaml:4: presets.a.loss: 2: must be a probability in [0, 1]"},
		{"flap short", job + "impairments:\n  - {link: h0, flap: {mean_up: 0s, mean_down: 1ms}}\n", "impairments[0].flap.mean_up: 0s: must be in [1µs, time_limit)"},
		{"fault direction", job + "faults:\n  - {at: 1ms, kind: node_crash, target: h0, direction: up}\n", `faults[0].direction: "up": node_crash is not a link fault`},
		{"rate change", job + "faults:\n  - {at: 1ms, kind: rate_change, target: h0}\n", "faults[0].value: 0: rate_change needs the new rate in Gb/s"},
		{"mtu change", job + "faults:\n  - {at: 1ms, kind: mtu_change, target: h0, value: 1500.5}\n", "faults[0].value: 1500.5: mtu_change needs the new MTU in bytes, a whole number in [68, 9000]"},
		{"switch crash duration", job + "faults:\n  - {at: 1ms, kind: switch_crash, duration: 1ms}\n", "faults[0].duration: 1ms: switch_crash takes no duration"},
		{"lose state", job + "faults:\n  - {at: 1ms, kind: link_down, target: h0, lose_state: true}\n", "faults[0].lose_state: true: only a node_crash loses state"},
		{"when two forms", job + "faults:\n  - {kind: link_down, target: h0, when: {job: a, iteration: 0, first_packet: true}}\n", "faults[0].when: \"first_packet, iteration\": must give exactly one of"},
		{"when job", job + "faults:\n  - {kind: link_down, target: h0, when: {job: zz, iteration: 0}}\n", `faults[0].when.job: "zz": must name a job`},
		{"when iteration", job + "faults:\n  - {kind: link_down, target: h0, when: {job: a, iteration: 1}}\n", "faults[0].when.iteration: 1: must be an iteration of job a: 0 … 0"},
		{"when allreduce", job + "faults:\n  - {kind: link_down, target: h0, when: {job: a, allreduce: 0, fraction: 1.5}}\n", "faults[0].when.fraction: 1.5: must be in [0, 1]"},
		{"when fraction alone", job + "faults:\n  - {kind: link_down, target: h0, when: {job: a, iteration: 0, fraction: 0.5}}\n", "faults[0].when.fraction: 0.5: only with allreduce"},
		{"when run fraction job", job + "faults:\n  - {kind: link_down, target: h0, when: {job: a, run_fraction: 0.5}}\n", `faults[0].when.job: "a": run_fraction counts every job's all-reduces`},
		{"unknown top", "jobz: []\n" + job, "x.yaml:1: jobz: unknown field; known: name, description, seed"},
		{"unknown in job", "jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1, gpus: 4}\n", "x.yaml:2: jobs[0].gpus: unknown field; known: name, model, workers"},
		{"type list", "jobs: 3\n", "x.yaml:1: jobs: 3: want a list"},
		{"type float", "topology: {link_gbps: fast}\n" + job, "x.yaml:1: topology.link_gbps: fast: want a number"},
		{"duration", "time_limit: forever\n" + job, "x.yaml:1: time_limit: forever: want a Go duration"},
		{"empty", "", "x.yaml: empty file"},
		{"syntax", "jobs: [\n", "x.yaml: yaml: line"},
		{"not a mapping", "- a\n", "x.yaml:1: want a mapping"},
		// five vgg16 jobs made on demand (their PSs' results) and two small
		// jobs held (2 copies per worker + 2).
		{"run gradients", "models: [{name: small, gradient_mib: 10, compute_ms: 1}]\njobs:\n" + vggJobs(5) + "  - {name: s0, model: small, workers: 8, iterations: 1}\n  - {name: s1, model: small, workers: 8, iterations: 1}\n",
			`x.yaml:3: jobs[0]: "vgg16 × 1 workers": the run would hold 8.09 GiB of gradients, reference sums and results, 1.55 GiB of them this job's`},
		{"run gradients lazily", "jobs:\n" + vggJobs(6),
			`x.yaml:2: jobs[0]: "vgg16 × 1 workers": the run would hold 9.28 GiB of gradients, reference sums and results, 1.55 GiB of them this job's (after tensor_scale 1: 4 B per element, 2 copies per worker + 2; for a job over 256 MiB, whose gradients are made on demand, its parameter server's results, 12 B per element): at most 8.00 GiB`},
		{"worker all-reduces", "scaling: {tensor_scale: 0.001}\njobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\n  - {name: b, model: resnet50, workers: 4, iterations: 1000000}\n",
			"x.yaml:4: jobs[1].iterations: 1000000: × 4 workers × 1 all-reduces per iteration = 4000000 all-reduces (all jobs: 4000002): at most 4000000 over all workers"},
		{"bucket count", "models: [{name: flat, gradient_mib: 1048576, compute_ms: 1}]\nscaling: {tensor_scale: 0.0001}\njobs:\n  - {name: a, model: flat, workers: 1, iterations: 1, bucket_mib: 0.000001}\n",
			"x.yaml:4: jobs[0].iterations: 1: × 1099511627776 buckets is more than 1000000 all-reduces"},
		{"own model", "models:\n  - {name: m, gradient_mib: 1, compute_ms: 1}\n  - {name: n, gradient_mib: 1e300, compute_ms: 1}\n" + job,
			"x.yaml:3: models[1].gradient_mib: 1e+300: must be in (0, 1048576]"},
		{"own model layer", "models:\n  - {name: m, gradient_mib: 1, compute_ms: 1, layers: [{params: -1, forward_us: 1, backward_us: 1}]}\n" + job,
			"x.yaml:2: models[0].layers[0].params: -1: must be between 1 and 274877906944"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.src), DefaultModels())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%v\nwant:\n%s", err, c.want)
			}
		})
	}
}

func TestScenarioManyErrorsInFileOrder(t *testing.T) {
	src := "policy: x\njobs:\n  - {name: a, model: nope, workers: 0, iterations: 1}\nscaling: {tensor_scale: 3}\n"
	_, err := Parse("x.yaml", []byte(src), DefaultModels())
	var se *Error
	if !errors.As(err, &se) || len(se.Errs) != 4 {
		t.Fatalf("%v", err)
	}
	lines := []int{1, 3, 3, 4}
	for i, fe := range se.Errs {
		if fe.Line != lines[i] {
			t.Errorf("error %d at line %d, want %d: %v", i, fe.Line, lines[i], fe)
		}
	}
}

func TestValidateAfterOverride(t *testing.T) {
	s, err := Embedded("freeina-single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.Policy = "bogus"
	if err := s.Validate(DefaultModels()); err == nil || !strings.Contains(err.Error(), `freeina-single.yaml:13: policy: "bogus"`) {
		t.Errorf("override: %v", err)
	}
}

func TestLoadScenarioMissing(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "no.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%v", err)
	}
}

func TestWithPolicyAndLinkConfig(t *testing.T) {
	src := `scaling: {rate_scale: 0.1, tensor_scale: 0.1}
topology: {link_gbps: 100, link_delay: 3us, queue_packets: 64, ps: {link_gbps: 200}}
jobs:
  - {name: a, model: resnet50, workers: 2, iterations: 1}
impairments:
  - {link: all, loss: 0.01}
  - {link: h1, corrupt: 0.5, jitter: 1us, reorder: 0.1, reorder_delay: 2us}
`
	ms := DefaultModels()
	s, err := Parse("x.yaml", []byte(src), ms)
	if err != nil {
		t.Fatal(err)
	}
	h0, h1, ps := s.LinkConfig("h0", DirUp), s.LinkConfig("h1", DirUp), s.LinkConfig("ps0", DirDown)
	if h0.BitsPerSecond != 10e9 || h0.Delay != 3*time.Microsecond || h0.QueuePackets != 64 || h0.Impairments.Loss != 0.01 {
		t.Errorf("h0 %+v", h0)
	}
	if h1.Impairments.Loss != 0 || h1.Impairments.Corrupt != 0.5 || h1.Jitter != time.Microsecond || h1.Impairments.ReorderDelay != 2*time.Microsecond {
		t.Errorf("h1 %+v", h1)
	}
	if ps.BitsPerSecond != 20e9 || ps.Impairments.Loss != 0.01 {
		t.Errorf("ps0 %+v", ps)
	}
	for _, p := range testbed.Names() {
		c, err := s.WithPolicy(p, ms)
		if err != nil || c.Policy != p || s.Policy != DefaultPolicy {
			t.Errorf("%s: %v", p, err)
		}
		c.Jobs[0].Workers = 9
		if s.Jobs[0].Workers != 2 {
			t.Error("copy shares jobs")
		}
	}
	if _, err := s.WithPolicy("bogus", ms); err == nil || !strings.Contains(err.Error(), `policy: "bogus"`) {
		t.Errorf("bogus policy: %v", err)
	}
}

// FuzzParseScenario: any input either parses into a scenario that
// validates and plans, or fails with an error naming the file.
func FuzzParseScenario(f *testing.F) {
	for _, n := range EmbeddedNames() {
		b, _ := fs.ReadFile(testdata.Scenarios, "scenarios/"+n)
		f.Add(b)
	}
	ents, _ := fs.ReadDir(testdata.Scenarios, "scenarios/invalid")
	for _, e := range ents {
		b, _ := fs.ReadFile(testdata.Scenarios, "scenarios/invalid/"+e.Name())
		f.Add(b)
	}
	ms := DefaultModels()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("f.yaml", data, ms)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := s.Validate(ms); err != nil {
			t.Fatalf("revalidation: %v", err)
		}
		for _, p := range s.Plan(ms) {
			if len(p.Hosts) != p.Workers || p.Packets < 1 {
				t.Fatalf("plan %+v", p)
			}
		}
		// Every policy's host costs, as a run takes them, are in range.
		for _, pol := range append(testbed.Names(), testbed.Variants()...) {
			for _, ps := range []bool{false, true} {
				if st := s.HostStack(pol, ps); st.Gbps < 0 || st.Tx() < 0 || st.Rx() < 0 || st.Latency < 0 || st.Latency.D() > time.Second {
					t.Fatalf("%s (ps %v): host cost %+v", pol, ps, st)
				}
			}
		}
		// validate and compare warn on every valid file: each warning
		// names its field and formats its values.
		for _, w := range s.Warnings(ms) {
			if !strings.HasPrefix(w, "topology.") || strings.Contains(w, "%!") {
				t.Fatalf("warning %q", w)
			}
		}
	})
}

// TestWarnings: a scenario whose link delays are a large share of an
// all-reduce is warned about, naming the field, the job and the share; one
// at true scale is not.
func TestWarnings(t *testing.T) {
	const jobs = "jobs:\n  - {name: r50, model: resnet50, workers: 8, iterations: 1}\n"
	s, err := Parse("x.yaml", []byte("scaling: {tensor_scale: 0.01, rate_scale: 0.01}\ntopology: {link_delay: 200us}\n"+jobs), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	w := s.Warnings(DefaultModels())
	if len(w) != 1 || !strings.Contains(w[0], "topology.link_delay: 200µs: 8 link traversals (1.6ms) are 15 % of job r50's ideal all-reduce (10.671ms)") ||
		!strings.Contains(w[0], "(0.15 % there") {
		t.Errorf("warnings %q", w)
	}
	s, err = Parse("x.yaml", []byte("topology: {link_delay: 2us}\n"+jobs), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(DefaultModels()); len(w) != 0 {
		t.Errorf("true scale warned: %q", w)
	}
	// Other fixed latencies, given longer than a true one in a scaled
	// scenario, warn as a stretched link delay does; short ones do not.
	s, err = Parse("x.yaml", []byte("scaling: {tensor_scale: 0.01, rate_scale: 0.01}\ntopology:\n  link_delay: 2us\n"+
		"  switch: {latency: 500us}\n  software_stack: {latency: 100us}\n  host_costs: {freeina: {ps: {latency: 300us}}, atp: {workers: {latency: 4us}}}\n"+
		"  ps: {cpu: {cores: 2, per_packet: 100us}}\n"+jobs), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	w = s.Warnings(DefaultModels())
	want := []string{"topology.switch.latency: 500µs: paid up to 8 times an all-reduce (4ms), is 37 % of job r50's ideal all-reduce (10.671ms)",
		"topology.software_stack.latency: 100µs: paid up to 8 times an all-reduce (800µs), is 7 %",
		"topology.host_costs.freeina.ps.latency: 300µs: paid up to 8 times an all-reduce (2.4ms), is 22 %",
		"topology.ps.cpu.per_packet: 100µs: paid up to 8 times an all-reduce (800µs), is 7 %"}
	if len(w) != len(want) {
		t.Errorf("warnings %q, want %d", w, len(want))
	}
	for i := range min(len(w), len(want)) {
		if !strings.Contains(w[i], want[i]) || !strings.Contains(w[i], "there if the") {
			t.Errorf("warning %q, want %q", w[i], want[i])
		}
	}
	// True delays at a scaled rate, small buckets: the share is the same at
	// true scale, no distortion.
	s, err = Parse("x.yaml", []byte("scaling: {tensor_scale: 0.001, rate_scale: 0.001}\njobs:\n  - {name: i, model: inception-v3, workers: 2, iterations: 1, bucket_mib: 25}\n"), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(DefaultModels()); len(w) != 0 {
		t.Errorf("true delays warned: %q", w)
	}
	// True delays at rate_scale 0.01 and memory for about one of three
	// jobs' windows: the shares round coarsely. With memory for every
	// window only SwitchML's pools round; at true scale nothing is said.
	three := "jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\n  - {name: b, model: resnet50, workers: 2, iterations: 1}\n  - {name: c, model: resnet50, workers: 2, iterations: 1}\n"
	for _, tc := range []struct {
		src, want string
	}{
		{"scaling: {tensor_scale: 0.01, rate_scale: 0.01}\ntopology: {link_delay: 1us, switch: {slots: 8}}\n",
			"topology.switch.slots: 8: a window is 7 aggregators at rate_scale 0.01 (145 at true scale), so the jobs' shares of the switch round coarsely (one aggregator is 14 % of a window)"},
		{"scaling: {tensor_scale: 0.01, rate_scale: 0.01}\ntopology: {link_delay: 1us, switch: {slots: 8}}\n",
			"`inabox rescale --rate-scale 0.5` writes it at a scale with a window of 50 or more"},
		// Every window fits, but SwitchML's pools (two windows asked, a
		// third of the memory given) round: 7 → 6.
		{"scaling: {tensor_scale: 0.01, rate_scale: 0.01}\ntopology: {link_delay: 1us, switch: {slots: 21}}\n",
			"topology.switch.slots: 21: if all 3 jobs are present at once, a SwitchML job's static pool is 6 aggregators (21 ÷ 3 = 7, rounded down to even), 14.3 % short"},
		{"topology: {link_delay: 1us, switch: {slots: 8}}\n", ""},
	} {
		s, err := Parse("x.yaml", []byte(tc.src+three), DefaultModels())
		if err != nil {
			t.Fatal(err)
		}
		w := s.Warnings(DefaultModels())
		if tc.want == "" && len(w) != 0 || tc.want != "" && (len(w) != 1 || !strings.Contains(w[0], tc.want)) {
			t.Errorf("%s: warnings %q, want %q", tc.src, w, tc.want)
		}
	}
}

// TestWarningsSwitchMLPools checks the warning that SwitchML's static pools
// lose more to rounding than at true scale: twelve jobs at rate_scale 0.5
// (a window of 75 aggregators), as `cluster-tight` rescaled, whose SwitchML
// JCT mean was 2.7 % off true scale's.
func TestWarningsSwitchMLPools(t *testing.T) {
	var jobs strings.Builder
	jobs.WriteString("jobs:\n")
	for i := range 12 {
		fmt.Fprintf(&jobs, "  - {name: j%d, model: resnet50, workers: 2, iterations: 1}\n", i)
	}
	for _, tc := range []struct {
		src, want string
	}{
		// 150 ÷ 12 = 12.5 → 12 (4.0 % short); at true scale 290 ÷ 12 =
		// 24.2 → 24 (0.7 %).
		{"scaling: {tensor_scale: 0.5, rate_scale: 0.5}\ntopology: {link_delay: 1us, switch: {slots: 150}}\n",
			"topology.switch.slots: 150: if all 12 jobs are present at once, a SwitchML job's static pool is 12 aggregators (150 ÷ 12 = 12.5, rounded down to even), 4.0 % short of its share, where at true scale (a window of 145 aggregators, 290 slots) it is 0.7 % short"},
		// 144 ÷ 12 = 12 exactly; at true scale 278 ÷ 12 = 23.2 → 22: true
		// scale loses more.
		{"scaling: {tensor_scale: 0.5, rate_scale: 0.5}\ntopology: {link_delay: 1us, switch: {slots: 144}}\n", ""},
		// Memory for two windows a job: every pool is what it asks for.
		{"scaling: {tensor_scale: 0.5, rate_scale: 0.5}\ntopology: {link_delay: 1us, switch: {slots: 1800}}\n", ""},
		// True scale: nothing to differ from.
		{"topology: {link_delay: 1us, switch: {slots: 290}}\n", ""},
		// Fewer than two aggregators a job: jobs wait for memory, a
		// matter for the coarse-window warning, not for rounding.
		{"scaling: {tensor_scale: 0.5, rate_scale: 0.5}\ntopology: {link_delay: 1us, switch: {slots: 20}}\n", ""},
	} {
		s, err := Parse("x.yaml", []byte(tc.src+jobs.String()), DefaultModels())
		if err != nil {
			t.Fatal(err)
		}
		w := s.Warnings(DefaultModels())
		if tc.want == "" && len(w) != 0 || tc.want != "" && (len(w) != 1 || !strings.Contains(w[0], tc.want)) {
			t.Errorf("%s: warnings %q, want %q", tc.src, w, tc.want)
		}
	}
}

// TestScenarioDocComplete: docs/scenarios.md has a row for every field of
// the scenario format (every YAML path of Scenario, "[]" for a list).
func TestScenarioDocComplete(t *testing.T) {
	doc, err := os.ReadFile("../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(p string, ty reflect.Type)
	walk = func(p string, ty reflect.Type) {
		for ty.Kind() == reflect.Slice {
			ty, p = ty.Elem(), p+"[]"
		}
		if ty.Kind() != reflect.Struct || reflect.PointerTo(ty).Implements(unmarshalerType) {
			paths = append(paths, p)
			return
		}
		for i := range ty.NumField() {
			f := ty.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || tag == "-" {
				continue
			}
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			if p != "" {
				tag = p + "." + tag
			}
			walk(tag, f.Type)
		}
	}
	walk("", reflect.TypeFor[Scenario]())
	if len(paths) < 40 {
		t.Fatalf("only %d fields found: %v", len(paths), paths)
	}
	for _, p := range paths {
		if !strings.Contains(string(doc), "| `"+p+"` |") {
			t.Errorf("docs/scenarios.md has no row for %s", p)
		}
	}
}

// vggJobs is n jobs of one vgg16 worker each, as YAML list items.
func vggJobs(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: v%d, model: vgg16, workers: 1, iterations: 1}\n", i)
	}
	return b.String()
}

// TestCheckProcesses: a job made on demand holds a result per worker in
// inabox up's processes, which a run in virtual time does not keep.
func TestCheckProcesses(t *testing.T) {
	t.Setenv(RunMemoryEnv, "") // the default bound, whatever the environment says
	s, err := Parse("x.yaml", []byte("jobs:\n  - {name: a, model: vgg16, workers: 16, iterations: 1}\n"), DefaultModels())
	if err != nil {
		t.Fatalf("a run in virtual time: %v", err)
	}
	err = s.CheckProcesses(DefaultModels())
	want := `x.yaml:2: jobs[0]: "vgg16 × 16 workers": inabox up's processes would hold 9.80 GiB of gradients, reference sums and results, 9.80 GiB of them this job's (after tensor_scale 1: 4 B per element, 2 copies per worker + 2; for a job over 256 MiB, whose gradients are made on demand, its parameter server's results, 12 B per element, and a result per worker, 4 B per element, kept by its process): at most 8.00 GiB`
	var se *Error
	if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &se) {
		t.Errorf("CheckProcesses:\n%v\nwant (a *Error) containing:\n%s", err, want)
	}
	s, err = Parse("x.yaml", []byte("jobs:\n  - {name: a, model: vgg16, workers: 8, iterations: 1}\n"), DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckProcesses(DefaultModels()); err != nil {
		t.Errorf("8 workers (5.7 GiB): %v", err)
	}
}

// TestRunMemoryLimit: RunMemoryEnv sets the bound on what a run holds, and
// a bad value is an error naming the variable.
func TestRunMemoryLimit(t *testing.T) {
	src := []byte("jobs:\n" + vggJobs(6)) // 9.28 GiB
	t.Setenv(RunMemoryEnv, "10")
	if _, err := Parse("x.yaml", src, DefaultModels()); err != nil {
		t.Errorf("%s=10: %v", RunMemoryEnv, err)
	}
	t.Setenv(RunMemoryEnv, "9")
	_, err := Parse("x.yaml", src, DefaultModels())
	if want := "at most 9.00 GiB (INABOX_MAX_RUN_GIB); lower scaling.tensor_scale"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s=9: %v; want it to contain %q", RunMemoryEnv, err, want)
	}
	for _, bad := range []string{"0", "-1", "lots", "NaN", "2e6"} {
		t.Setenv(RunMemoryEnv, bad)
		_, err := Parse("x.yaml", src, DefaultModels())
		if want := "x.yaml: INABOX_MAX_RUN_GIB: " + strconv.Quote(bad) + ": want a number of GiB in (0, 1048576]"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v; want %q", RunMemoryEnv, bad, err, want)
		}
	}
}
