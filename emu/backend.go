package emu

import (
	"fmt"
	"net/netip"
	"strings"
)

// PortSpec names a backend and its settings, as scenario files and command
// lines give them:
//
//	mem                                  (an in-memory pipe; see OpenPort)
//	udp:LOCAL->REMOTE                    e.g. udp:127.0.0.1:9000->127.0.0.1:9001
//	tap:NAME                             e.g. tap:inabox0
type PortSpec struct {
	Backend string // "mem", "udp" or "tap"
	Local   netip.AddrPort
	Remote  netip.AddrPort
	TAPName string
	// BatchSize is the backend's batch size; 0 means its default.
	BatchSize int
}

// Backends lists the port backends OpenPort knows.
var Backends = []string{"mem", "udp", "tap"}

// ParsePortSpec parses a backend spec of the forms shown at PortSpec.
func ParsePortSpec(s string) (PortSpec, error) {
	kind, rest, _ := strings.Cut(s, ":")
	switch kind {
	case "mem":
		if rest != "" {
			return PortSpec{}, &ConfigError{"port " + s, "mem", rest, "takes no settings"}
		}
		return PortSpec{Backend: "mem"}, nil
	case "udp":
		l, r, ok := strings.Cut(rest, "->")
		if !ok {
			return PortSpec{}, &ConfigError{"port " + s, "udp", rest, "want LOCAL->REMOTE, e.g. 127.0.0.1:9000->127.0.0.1:9001"}
		}
		la, err := netip.ParseAddrPort(l)
		if err != nil {
			return PortSpec{}, &ConfigError{"port " + s, "udp local address", l, err.Error()}
		}
		ra, err := netip.ParseAddrPort(r)
		if err != nil {
			return PortSpec{}, &ConfigError{"port " + s, "udp remote address", r, err.Error()}
		}
		return PortSpec{Backend: "udp", Local: la, Remote: ra}, nil
	case "tap":
		if rest == "" || len(rest) > 15 {
			return PortSpec{}, &ConfigError{"port " + s, "tap name", rest, "must be 1 to 15 bytes"}
		}
		return PortSpec{Backend: "tap", TAPName: rest}, nil
	}
	return PortSpec{}, &ConfigError{"port " + s, "backend", kind, fmt.Sprintf("unknown backend; known: %s", strings.Join(Backends, ", "))}
}

// OpenPort opens the backend a spec names. For "mem" it returns one end of a
// new in-memory pipe and the other end as peer, for the caller to drive; for
// the other backends peer is nil.
func OpenPort(spec PortSpec) (p Port, peer Port, err error) {
	switch spec.Backend {
	case "mem":
		a, b := NewMemPipe(spec.BatchSize, 0)
		return a, b, nil
	case "udp":
		u, err := NewUDPPortConfig(UDPConfig{Local: spec.Local, Remote: spec.Remote, BatchSize: spec.BatchSize})
		if err != nil {
			return nil, nil, err
		}
		return u, nil, nil
	case "tap":
		t, err := NewTAPPort(TAPConfig{Name: spec.TAPName, BatchSize: spec.BatchSize})
		if err != nil {
			return nil, nil, err
		}
		return t, nil, nil
	}
	return nil, nil, &ConfigError{"port", "Backend", spec.Backend, fmt.Sprintf("unknown backend; known: %s", strings.Join(Backends, ", "))}
}
