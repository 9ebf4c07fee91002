package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestResultsTables: each table of docs/results.md's "Tables" section is
// the output of the `inabox compare FILE` printed above it, byte for byte,
// so the page cannot fall behind the code unnoticed. The suite checks the
// default scenario's (a fraction of a second); INABOX_LONG=1 (make soak)
// all of them (about 70 s on this 2-core machine).
func TestResultsTables(t *testing.T) {
	doc, err := os.ReadFile("../../docs/results.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	start, end := strings.Index(s, "\n## Tables\n"), strings.Index(s, "\n## Run times\n")
	if start < 0 || end < start {
		t.Fatal(`docs/results.md: no "## Tables" section before "## Run times"`)
	}
	tables := regexp.MustCompile("(?s)### `([^`]+)`\n\n`inabox (compare [^`]+)`\n\n```\n(.*?)```").FindAllStringSubmatch(s[start:end], -1)
	if len(tables) < 8 {
		t.Fatalf("docs/results.md: %d tables in its Tables section, want 8", len(tables))
	}
	long := os.Getenv("INABOX_LONG") != ""
	for _, tb := range tables {
		name, args, want := tb[1], strings.Fields(tb[2]), tb[3]
		if name != "default" && !long {
			continue
		}
		t.Run(name, func(t *testing.T) {
			run := []string{args[0], "--parallel", "1"}
			for _, a := range args[1:] {
				if strings.HasSuffix(a, ".yaml") {
					a = "../../" + a // the page's paths are the repository's
				}
				run = append(run, a)
			}
			var out, errb bytes.Buffer
			if err := runCLI(run, &out, &errb); err != nil {
				t.Fatalf("inabox %s: %v\n%s", strings.Join(args, " "), err, errb.String())
			}
			if got := out.String(); got != want {
				t.Errorf("docs/results.md's table %q is not what `inabox %s` prints now; regenerate it:\n%s", name, strings.Join(args, " "), lineDiff(want, got))
			}
		})
	}
}

// lineDiff lists the lines of want and got that differ, by position.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("- " + a + "\n+ " + c + "\n")
		}
	}
	return b.String()
}
