package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpEmitK8s: inabox up --emit k8s DIR [FILE] writes the manifests
// (harness/up/k8s checks them) without root and runs nothing.
func TestUpEmitK8s(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k8s")
	var out, errb bytes.Buffer
	if code := cli([]string{"up", "--emit", "k8s", "--name", "t", dir, "../../harness/up/testdata/up-16mb.yaml"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"kustomization.yaml", "namespace.yaml", "configmap.yaml", "switch.yaml", "ps.yaml", "w1-0.yaml", "w1-3.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "6 pods in namespace inabox") || !strings.Contains(out.String(), "logs -f t-w1-3") {
		t.Errorf("stdout:\n%s", out.String())
	}
}

// TestUpEmitK8sCoLocated: with co-located PSs there is no PS pod; each
// job's rank-0 worker pod runs its host (NIC, worker and PS).
func TestUpEmitK8sCoLocated(t *testing.T) {
	src, err := os.ReadFile("../../harness/up/testdata/up-colocated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Without its faults: a Kubernetes deployment has no orchestrator to fire them.
	file := filepath.Join(t.TempDir(), "coloc.yaml")
	if err := os.WriteFile(file, []byte(strings.Split(string(src), "\nfaults:")[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "k8s")
	var out, errb bytes.Buffer
	if code := cli([]string{"up", "--emit", "k8s", dir, file}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "configmap.yaml kustomization.yaml namespace.yaml switch.yaml w1-0.yaml w1-1.yaml w2-0.yaml w2-1.yaml" {
		t.Errorf("files: %s", got)
	}
	if !strings.Contains(out.String(), "5 pods in namespace inabox") {
		t.Errorf("stdout:\n%s", out.String())
	}
}
