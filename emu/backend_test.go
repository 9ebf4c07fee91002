package emu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/inabox/inabox/emu"
)

func TestParsePortSpec(t *testing.T) {
	good := map[string]emu.PortSpec{
		"mem":                                {Backend: "mem"},
		"tap:inabox0":                        {Backend: "tap", TAPName: "inabox0"},
		"udp:127.0.0.1:9000->127.0.0.1:9001": {Backend: "udp"},
	}
	for s, want := range good {
		got, err := emu.ParsePortSpec(s)
		if err != nil || got.Backend != want.Backend || got.TAPName != want.TAPName {
			t.Errorf("%q: %+v %v", s, got, err)
		}
	}
	bad := map[string]string{
		"pcie:0":                    "backend = pcie: unknown backend; known: mem, udp, tap",
		"udp:127.0.0.1:9000":        "want LOCAL->REMOTE",
		"udp:nonsense->127.0.0.1:1": `udp local address = nonsense`,
		"udp:127.0.0.1:1->x":        "udp remote address = x",
		"tap:":                      "tap name = : must be 1 to 15 bytes",
		"tap:abcdefghijklmnopq":     "tap name = abcdefghijklmnopq",
		"mem:3":                     "mem = 3: takes no settings",
	}
	for s, want := range bad {
		_, err := emu.ParsePortSpec(s)
		var ce *emu.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", s, err, want)
		}
	}
	if _, _, err := emu.OpenPort(emu.PortSpec{Backend: "carrier-pigeon"}); err == nil || !strings.Contains(err.Error(), "carrier-pigeon") {
		t.Errorf("OpenPort with an unknown backend: %v", err)
	}
	p, peer, err := emu.OpenPort(emu.PortSpec{Backend: "mem"})
	if err != nil || p == nil || peer == nil {
		t.Fatalf("mem: %v %v %v", p, peer, err)
	}
	p.Close()
	peer.Close()
}
