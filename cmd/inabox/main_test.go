package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runCLI([]string{"demo", "--messages", "500"}, &out, &errb); err != nil {
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
		"--messages = 0":                {"demo", "--messages", "0"},
		"takes no arguments":            {"demo", "x.yaml"},
		"flag provided but not defined": {"run", "--bogus"},
	}
	for want, args := range cases {
		var out, errb bytes.Buffer
		err := runCLI(args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want %q", args, err, want)
		}
	}
}

func TestDecodeDefaultScenarioPcap(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := runCLI([]string{"demo", "--messages", "200", "--pcap", dir}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runCLI([]string{"decode", dir + "/h1-sw0.pcap"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"RRoCE SEND Only QP=0x000022", "INA job=1 allreduce=1 chunk=0 worker=0", "ICRC ok", "Acknowledge"} {
		if !strings.Contains(s, want) {
			t.Errorf("decode output lacks %q", want)
		}
	}
	if err := runCLI([]string{"decode"}, &out, &errb); err == nil {
		t.Error("decode without a file succeeded")
	}
	if err := runCLI([]string{"decode", dir + "/nope.pcap"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "nope.pcap") {
		t.Errorf("decode of a missing file: %v", err)
	}
}
