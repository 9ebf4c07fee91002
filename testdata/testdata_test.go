package testdata

import (
	"io/fs"
	"strings"
	"testing"
)

func TestEmbedded(t *testing.T) {
	if !strings.Contains(string(Models), "name: resnet50") {
		t.Error("models.yaml not embedded")
	}
	for _, dir := range []string{"scenarios", "scenarios/invalid"} {
		ents, err := fs.ReadDir(Scenarios, dir)
		if err != nil || len(ents) < 3 {
			t.Errorf("%s: %d entries, %v", dir, len(ents), err)
		}
	}
}
