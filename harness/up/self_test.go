package up

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSelfCommand: without ina<role> beside the executable, a role runs as
// `EXECUTABLE ROLE ARGS` (the inabox binary's role commands); with it, as
// that binary.
func TestSelfCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	beside := filepath.Join(filepath.Dir(exe), "inaps")
	if _, err := os.Stat(beside); err == nil {
		t.Fatalf("%s exists: the test needs a directory without it", beside)
	}
	c := SelfCommand("ps", []string{"--node", "ps0"})
	if c.Path != exe || !slices.Equal(c.Args[1:], []string{"ps", "--node", "ps0"}) {
		t.Errorf("ps: %s %q, want %s ps --node ps0", c.Path, c.Args, exe)
	}
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(beside)
	if c := SelfCommand("ps", []string{"-h"}); c.Path != beside || !slices.Equal(c.Args[1:], []string{"-h"}) {
		t.Errorf("with inaps beside: %s %q", c.Path, c.Args)
	}
}
