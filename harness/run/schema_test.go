package run

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/report"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestResultsSchema: results.json of runs that exercise every optional
// part (faults, host costs, policies without switch memory or a PS path)
// validates against docs/results.schema.json, which allows no field it does
// not describe; every CSV column is documented in docs/results-format.md.
func TestResultsSchema(t *testing.T) {
	f, err := os.Open("../../docs/results.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("results.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("results.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	format, err := os.ReadFile("../../docs/results-format.md")
	if err != nil {
		t.Fatal(err)
	}
	faults := "faults:\n  - {at: 30ms, kind: loss_burst, target: h0, duration: 2ms, value: 0.3, direction: up}\n" +
		"  - {kind: switch_reboot, when: {run_fraction: 0.5}}\n"
	costs := "  host_costs: {atp: {ps: {gbps: 40, tx_gbps: 30}}, freeina: {workers: {gbps: 50, rx_gbps: 20, latency: 1us}}}\n"
	for _, c := range []struct{ policy, extra, topology string }{
		{"atp", faults, ""}, {"freeina", faults, ""}, {"none", "", ""}, {"switchml", "", ""},
		{"atp", "", costs}, {"freeina", "", costs},
	} {
		s := tiny(t, c.extra)
		if c.topology != "" {
			var err error
			if s, err = scenario.Parse("tiny.yaml", []byte(strings.Replace(tinyScenario, "topology:\n", "topology:\n"+c.topology, 1)+c.extra), scenario.DefaultModels()); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Run(s, Options{Policy: c.policy})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := report.WriteResultsJSON(&b, r); err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s: results.json does not follow docs/results.schema.json: %v", c.policy, err)
		}
		// the schema can fail: a field it does not describe is refused
		var m map[string]any
		if err := json.Unmarshal(b.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		m["surprise"] = 1
		if err := sch.Validate(m); err == nil {
			t.Error("the schema accepts a field it does not describe")
		}
		var as map[string]any
		if err := json.Unmarshal(r.ScenarioAsRun, &as); err != nil || as["policy"] != c.policy {
			t.Errorf("%s: scenario_as_run %v (policy %v)", c.policy, err, as["policy"])
		}
		// every CSV column is documented
		var jobs, iters bytes.Buffer
		if err := report.WriteJobsCSV(&jobs, r); err != nil {
			t.Fatal(err)
		}
		if err := report.WriteIterationsCSV(&iters, r.Jobs[0]); err != nil {
			t.Fatal(err)
		}
		for _, out := range []*bytes.Buffer{&jobs, &iters} {
			header, err := csv.NewReader(out).Read()
			if err != nil {
				t.Fatal(err)
			}
			for _, col := range header {
				if !strings.Contains(string(format), "`"+col+"`") {
					t.Errorf("CSV column %s is not in docs/results-format.md", col)
				}
			}
		}
	}
}
