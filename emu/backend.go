package emu

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// PortSpec names a backend and its settings, as scenario files and command
// lines give them:
//
//	mem                                  (an in-memory pipe; see OpenPort)
//	udp:LOCAL->REMOTE                    e.g. udp:127.0.0.1:9000->127.0.0.1:9001
//	                                          udp:0.0.0.0:7000->inabox-switch:7003
//	tap:NAME                             e.g. tap:inabox0
//
// LOCAL is a literal IPv4 address and port. REMOTE is a literal address
// and port (Remote) or a DNS host name and port (RemoteHost, Remote unset),
// which Resolve or OpenPort looks up.
type PortSpec struct {
	Backend string // "mem", "udp" or "tap"
	Local   netip.AddrPort
	Remote  netip.AddrPort
	// RemoteHost is REMOTE when it names a host rather than an address:
	// "name:port", resolved to Remote by Resolve (and by OpenPort).
	RemoteHost string
	TAPName    string
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
		if err == nil {
			return PortSpec{Backend: "udp", Local: la, Remote: ra}, nil
		}
		h, port, herr := splitHostPort(r)
		if herr == nil {
			return PortSpec{Backend: "udp", Local: la, RemoteHost: net.JoinHostPort(h, strconv.Itoa(int(port)))}, nil
		}
		if strings.Contains(r, ":") && !looksNumeric(r) {
			err = herr // a host name and port, malformed
		}
		return PortSpec{}, &ConfigError{"port " + s, "udp remote address", r, err.Error()}
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
		if spec.RemoteHost != "" && !spec.Remote.IsValid() {
			var err error
			if spec, err = spec.Resolve(); err != nil {
				return nil, nil, err
			}
		}
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

// splitHostPort splits "name:port" with a DNS host name (letters, digits,
// '-', '.', '_'; at most 253 bytes; labels of at most 63) and a port
// 1-65535.
func splitHostPort(s string) (string, uint16, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("port %q: want 1 to 65535", p)
	}
	if h == "" || len(h) > 253 {
		return "", 0, errors.New("host name must be 1 to 253 bytes")
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return "", 0, fmt.Errorf("host name %q: empty label or one longer than 63 bytes", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", 0, fmt.Errorf("host name %q: character %q", h, c)
			}
		}
	}
	if looksNumeric(h) {
		return "", 0, fmt.Errorf("%q is neither an IPv4 address nor a host name", h)
	}
	return h, uint16(port), nil
}

// looksNumeric reports whether s holds only digits, dots and colons: a
// malformed address rather than a host name.
func looksNumeric(s string) bool {
	return strings.Trim(s, "0123456789.:") == ""
}

// Resolve returns the spec with RemoteHost looked up (the first IPv4
// address of the name) into Remote; a spec without RemoteHost is
// returned as it is. One lookup, no retry.
func (s PortSpec) Resolve() (PortSpec, error) {
	if s.RemoteHost == "" {
		return s, nil
	}
	a, err := net.ResolveUDPAddr("udp4", s.RemoteHost)
	if err != nil {
		return s, fmt.Errorf("emu: udp port: resolving %s: %w", s.RemoteHost, err)
	}
	ap := a.AddrPort()
	s.Remote = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	return s, nil
}

// String returns the spec in ParsePortSpec's form (the remote as given:
// its host name if it has one).
func (s PortSpec) String() string {
	switch s.Backend {
	case "udp":
		r := s.Remote.String()
		if s.RemoteHost != "" {
			r = s.RemoteHost
		}
		return "udp:" + s.Local.String() + "->" + r
	case "tap":
		return "tap:" + s.TAPName
	}
	return s.Backend
}
