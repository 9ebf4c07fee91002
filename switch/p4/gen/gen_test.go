package gen

import (
	"bytes"
	"os"
	"testing"
)

const p4Path = "../ina.p4"

// TestP4UpToDate fails if the checked-in switch/p4/ina.p4 differs from what
// the generator produces.
func TestP4UpToDate(t *testing.T) {
	got, err := os.ReadFile(p4Path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("switch/p4/ina.p4 is stale: %s", Command)
	}
}
