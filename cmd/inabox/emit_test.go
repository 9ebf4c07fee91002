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
