package testbed

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the docs")

// policyTable is the README's policy table, rendered from the registry.
func policyTable() string {
	var b strings.Builder
	b.WriteString("| policy | what it is | role |\n|---|---|---|\n")
	for _, e := range Entries() {
		role := "design under study"
		switch {
		case e.Variant:
			role = "ablation variant: named with `--policy`/`--policies`, not in `compare`'s default set"
		case e.Reference:
			role = "baseline; the reference of `compare`'s ratios"
		case e.Baseline:
			role = "baseline"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Name, e.Summary, role)
	}
	return b.String()
}

// TestPolicyTable: README.md lists exactly the registered policies (the
// table between its policies markers is generated; -update rewrites it).
func TestPolicyTable(t *testing.T) {
	const file = "../../README.md"
	const begin, end = "<!-- policies: generated from harness/testbed's registry -->\n", "<!-- /policies -->"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no policies markers", file)
	}
	got, want := s[i+len(begin):j], policyTable()
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s's policy table is stale: go test ./harness/testbed -run TestPolicyTable -update\nwant:\n%s", file, want)
	}
	if err := os.WriteFile(file, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRegistry: names are unique, exactly one reference, baselines first.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	refs := 0
	designs := false
	for _, e := range Entries() {
		if seen[e.Name] || e.Name == "" || e.New == nil || e.Summary == "" {
			t.Errorf("bad entry %+v", e)
		}
		seen[e.Name] = true
		if e.Reference {
			refs++
			if !e.Baseline {
				t.Errorf("%s: the reference must be a baseline", e.Name)
			}
		}
		if !e.Baseline {
			designs = true
		} else if designs {
			t.Errorf("%s: baselines come first", e.Name)
		}
		if p := e.New(); p.Name() != e.Name {
			t.Errorf("%s: its policy calls itself %q", e.Name, p.Name())
		}
	}
	if refs != 1 {
		t.Errorf("%d reference policies, want 1", refs)
	}
	if _, ok := Lookup("magic"); ok {
		t.Error("Lookup found an unregistered policy")
	}
}

// TestVariants: the ablation variants can be looked up and built, are not
// in Names (so compare and the golden outputs leave them out), and each
// builds the DynaINA control plane with its mechanism switched.
func TestVariants(t *testing.T) {
	vs := Variants()
	if len(vs) < 3 {
		t.Fatalf("variants %v", vs)
	}
	for _, v := range vs {
		e, ok := Lookup(v)
		if !ok || !e.Variant || e.New().Name() != v {
			t.Errorf("%s: %+v", v, e)
		}
		for _, n := range Names() {
			if n == v {
				t.Errorf("%s is in Names", v)
			}
		}
	}
}
