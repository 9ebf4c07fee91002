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

// TestParsePortSpecHost: a UDP remote may be a host name (resolved when
// the port opens); literal addresses keep parsing into Remote.
func TestParsePortSpecHost(t *testing.T) {
	got, err := emu.ParsePortSpec("udp:0.0.0.0:7000->inabox-switch:7003")
	if err != nil || got.RemoteHost != "inabox-switch:7003" || got.Remote.IsValid() || got.Local.Port() != 7000 {
		t.Fatalf("host name: %+v %v", got, err)
	}
	if s := got.String(); s != "udp:0.0.0.0:7000->inabox-switch:7003" {
		t.Errorf("String() = %q", s)
	}
	got, err = emu.ParsePortSpec("udp:127.0.0.1:9000->10.0.0.2:9001")
	if err != nil || got.RemoteHost != "" || got.Remote.String() != "10.0.0.2:9001" {
		t.Fatalf("literal: %+v %v", got, err)
	}
	if r, err := got.Resolve(); err != nil || r != got {
		t.Errorf("Resolve of a literal: %+v %v", r, err)
	}
	loc, err := emu.ParsePortSpec("udp:127.0.0.1:0->localhost:9")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := loc.Resolve(); err != nil || r.Remote.String() != "127.0.0.1:9" {
		t.Errorf("localhost resolved to %+v %v", r, err)
	}
	for s, want := range map[string]string{
		"udp:127.0.0.1:1->host:0":         `port "0"`,
		"udp:127.0.0.1:1->host:99999":     `port "99999"`,
		"udp:127.0.0.1:1->ho st:1":        `character ' '`,
		"udp:127.0.0.1:1->:1":             "udp remote address = :1",
		"udp:127.0.0.1:1->10.0.0.300:1":   "udp remote address = 10.0.0.300:1",
		"udp:127.0.0.1:1->host":           "udp remote address = host",
		"udp:inabox-switch:1->10.0.0.1:1": "udp local address = inabox-switch:1",
		"udp:127.0.0.1:1->a..b:1":         "empty label",
	} {
		_, err := emu.ParsePortSpec(s)
		var ce *emu.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", s, err, want)
		}
	}
}

// FuzzParsePortSpec: any string parses or fails with a ConfigError, never
// panics, and a parsed spec prints back to a spec that parses to itself.
func FuzzParsePortSpec(f *testing.F) {
	for _, s := range []string{"mem", "tap:inabox0", "udp:127.0.0.1:9000->127.0.0.1:9001", "udp:0.0.0.0:7000->inabox-switch:7003", "udp:1.2.3.4:5->a.b.c:6", "udp:->", "tap:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := emu.ParsePortSpec(s)
		if err != nil {
			var ce *emu.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%q: %T %v is not a ConfigError", s, err, err)
			}
			return
		}
		again, err := emu.ParsePortSpec(ps.String())
		if err != nil || again != ps {
			t.Fatalf("%q → %+v → %q → %+v %v", s, ps, ps.String(), again, err)
		}
	})
}
