package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/testbed"
)

// TestGoldenDefault is the in-suite part of scripts/golden.sh: the embedded
// default scenario under every policy (`run --out --pcap`, and `decode` of
// every pcap) must give exactly the bytes recorded in
// testdata/golden/manifest.sha256. A change meant to preserve behaviour
// keeps it green; a change of output updates the manifest in its own commit
// (scripts/golden.sh update), with the reason.
//
// It runs without the race detector: under -race it took 71 s (about a
// tenth of the suite's CPU, the longest test of all) for code the race run
// covers elsewhere. `make test` runs
// it first on its own (go test -run '^TestGoldenDefault$' ./cmd/inabox),
// then skips it in the -race run.
func TestGoldenDefault(t *testing.T) {
	if raceEnabled {
		t.Skip("run without -race: make test runs it in its own step before the -race run")
	}
	want := readManifest(t, "../../testdata/golden/manifest.sha256", "./default/")
	if len(want) == 0 {
		t.Fatal("manifest has no ./default/ entries")
	}
	root := t.TempDir()
	got := map[string]string{}
	for _, p := range testbed.Names() {
		d := filepath.Join(root, "default", p)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Chdir(d)
		var out, errb bytes.Buffer
		if err := runCLI([]string{"run", "--policy", p, "--out", "out", "--pcap", "pcap"}, &out, &errb); err != nil {
			t.Fatalf("run --policy %s: %v\n%s", p, err, errb.String())
		}
		if err := os.WriteFile("stdout.txt", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		pcaps, _ := filepath.Glob("pcap/*.pcap")
		for _, c := range pcaps {
			var dec bytes.Buffer
			if err := runCLI([]string{"decode", c}, &dec, io.Discard); err != nil {
				t.Fatalf("decode %s: %v", c, err)
			}
			if err := os.WriteFile(c+".decode.txt", dec.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var cmp bytes.Buffer
	if err := runCLI([]string{"compare", "--json"}, &cmp, io.Discard); err != nil {
		t.Fatalf("compare: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "default", "compare.json"), cmp.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(filepath.Join(root, "default"), func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		sum := sha256.Sum256(b)
		got["./"+filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	for _, k := range sortedKeys(want, got) {
		if want[k] != got[k] {
			switch {
			case got[k] == "":
				diffs = append(diffs, "missing   "+k)
			case want[k] == "":
				diffs = append(diffs, "unexpected "+k)
			default:
				diffs = append(diffs, "differs   "+k)
			}
		}
	}
	if len(diffs) > 0 {
		t.Errorf("outputs differ from testdata/golden/manifest.sha256 (scripts/golden.sh record DIR on both revisions, then diff):\n%s",
			strings.Join(diffs, "\n"))
	}
}

func readManifest(t *testing.T, file, prefix string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, path, ok := strings.Cut(sc.Text(), "  ")
		if ok && strings.HasPrefix(path, prefix) {
			out[path] = sum
		}
	}
	return out
}

func sortedKeys(a, b map[string]string) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}
