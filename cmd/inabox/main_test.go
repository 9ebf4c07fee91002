package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunDefault(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"run", "--messages", "500"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, want := range []string{"default scenario", "h1:0<->s:0", "retransmits"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunBadInput(t *testing.T) {
	cases := map[string][]string{
		"unknown command":               {"frobnicate"},
		"--messages = 0":                {"run", "--messages", "0"},
		"not supported yet":             {"run", "x.yaml"},
		"flag provided but not defined": {"run", "--bogus"},
	}
	for want, args := range cases {
		var out, errb bytes.Buffer
		err := run(args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want %q", args, err, want)
		}
	}
}
