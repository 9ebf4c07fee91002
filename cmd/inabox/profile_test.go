package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfile: run and compare --cpuprofile FILE write a gzipped pprof
// profile of the runs, and leave the results as they are without it; a
// file that cannot be made is an error naming the flag and the file,
// before any run.
func TestCPUProfile(t *testing.T) {
	f := tinyFile(t)
	dir := t.TempDir()
	for _, cmd := range []string{"run", "compare"} {
		prof := filepath.Join(dir, cmd+".prof")
		args := []string{cmd, "--policy", "freeina", f}
		if cmd == "compare" {
			args = []string{cmd, "--policies", "atp,freeina", f}
		}
		var plain, out, errb bytes.Buffer
		if err := runCLI(args, &plain, &errb); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errb.String())
		}
		err := runCLI(append([]string{cmd, "--cpuprofile", prof}, args[1:]...), &out, &errb)
		if err != nil && strings.Contains(err.Error(), "already in use") {
			t.Skipf("the test binary is being profiled itself: %v", err)
		}
		if err != nil {
			t.Fatalf("%s --cpuprofile: %v\n%s", cmd, err, errb.String())
		}
		if out.String() != plain.String() {
			t.Errorf("%s: the output changed with --cpuprofile:\n%s\nwithout:\n%s", cmd, out.String(), plain.String())
		}
		b, err := os.ReadFile(prof)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // pprof's profile.proto, gzipped
			t.Errorf("%s: %s is not a gzipped profile (%d bytes)", cmd, prof, len(b))
		}
		bad := filepath.Join(dir, "missing", "x.prof")
		err = runCLI(append([]string{cmd, "--cpuprofile", bad}, args[1:]...), &out, &errb)
		if err == nil || !strings.Contains(err.Error(), "--cpuprofile "+bad) {
			t.Errorf("%s --cpuprofile %s: error %v, want one naming the flag and the file", cmd, bad, err)
		}
	}
}
