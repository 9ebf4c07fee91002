package emu_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEExample takes the Go example out of README.md, checks that it
// is emu/example_test.go (as a user's package), and runs it in a fresh
// module that requires this checkout, the way the README tells a user to.
func TestREADMEExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a fresh module: skipped with -short")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```go\npackage mytest\n"
	i := strings.Index(string(readme), open)
	if i < 0 {
		t.Fatal("README.md has no ```go block starting with package mytest")
	}
	block := string(readme[i+len("```go\n"):])
	block = block[:strings.Index(block, "```\n")]
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want := string(ex[strings.Index(string(ex), "import ("):])
	if got := block[strings.Index(block, "import ("):]; got != want {
		t.Fatalf("README.md's example differs from emu/example_test.go:\n%s", got)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "example_test.go"), []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	for _, args := range [][]string{
		{"mod", "init", "example.com/mytest"},
		{"mod", "edit", "-require", "github.com/inabox/inabox@v0.0.0", "-replace", "github.com/inabox/inabox=" + root},
		{"mod", "tidy"},
		{"test", "-count=1", "./..."},
	} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
