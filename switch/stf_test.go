package sw

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/p4/bmv2"
)

// This file is the Go runner for the STF vectors in testdata/stf: the
// subset of p4c's STF format (backends/bmv2/bmv2stf.py) the vectors use,
// read by switch/p4/bmv2 (ParseSTF, Packet.Match, Cmd.Expected), the same
// reader that runs them on BMv2.
//
//	add <table> [<prio>] <key>:<value>... <action>(<param>:<value>, ...)
//	setdefault <table> <action>(<param>:<value>, ...)
//	mc_mgrp_create <group> | mc_node_create <rid> <port>... | mc_node_associate <group> <handle>
//	register_read <register> <index>   # expect <value>
//	packet <port> <hex>
//	expect <port> <hex with * nibbles>[$]
//
// Tables, actions and registers have the P4 twin's names (switch/p4/ina.p4);
// a name may carry the control's prefix (MyIngress.). register_read results
// are not checked by BMv2's runner; here the trailing "# expect <v>" comment
// is checked. Outputs of all packets are compared with the expect lines per
// port, in order, after the last packet (as bmv2stf.py does); register
// reads see the state at their position in the file. Every frame the Go
// switch emits that is RoCEv2 must also carry a correct ICRC.

type stfResult struct {
	packets, expects, registers int
}

// stfT is the part of testing.T the runner uses (faked in the runner's own test).
type stfT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var errFakeFatal = errors.New("fake fatal")

type fakeT struct{ failed bool }

func (f *fakeT) Helper()               {}
func (f *fakeT) Fatal(...any)          { f.failed = true; panic(errFakeFatal) }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true; panic(errFakeFatal) }

func runSTF(t stfT, path string) stfResult {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := bmv2.ParseSTF(f)
	f.Close()
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	s, err := New(Config{Slots: 4096, Ports: 64})
	if err != nil {
		t.Fatal(err)
	}
	var res stfResult
	type expect struct {
		line int
		bmv2.Packet
	}
	var expects []expect
	got := map[int][][]byte{}
	for _, c := range cmds {
		fail := func(format string, a ...any) {
			t.Helper()
			t.Fatalf("%s:%d: %s %s: %s", filepath.Base(path), c.Line, c.Op, strings.Join(c.Args, " "), fmt.Sprintf(format, a...))
		}
		fields := c.Args
		switch c.Op {
		case "add":
			if err := stfAdd(s, fields); err != nil {
				fail("%v", err)
			}
		case "setdefault":
			if err := stfSetDefault(s, fields); err != nil {
				fail("%v", err)
			}
		case "mc_mgrp_create":
			s.McastGroupCreate(uint16(mustNum(fields[0])))
		case "mc_node_create":
			var ports []int
			for _, p := range fields[1:] {
				ports = append(ports, int(mustNum(p)))
			}
			if _, err := s.McastNodeCreate(uint16(mustNum(fields[0])), ports...); err != nil {
				fail("%v", err)
			}
		case "mc_node_associate":
			if err := s.McastNodeAssociate(uint16(mustNum(fields[0])), int(mustNum(fields[1]))); err != nil {
				fail("%v", err)
			}
		case "register_read":
			name := strings.TrimSuffix(strings.TrimPrefix(fields[0], "MyIngress."), ".values")
			v, ok := s.ReadRegister(name, int(mustNum(fields[1])))
			if !ok {
				fail("unknown register")
			}
			want, checked, err := c.Expected()
			if err != nil {
				fail("%v", err)
			}
			if checked {
				if v != want {
					fail("register = %#x, want %#x", v, want)
				}
				res.registers++
			}
		case "packet":
			pk, _ := c.Packet() // checked by ParseSTF
			res.packets++
			for _, o := range runBatch(s, []Frame{{Data: pk.Data, InPort: pk.Port}}) {
				if rdma.CheckICRC(o.frame) != isRoCE(o.frame) {
					fail("output to port %d has a bad ICRC", o.port)
				}
				got[o.port] = append(got[o.port], o.frame)
			}
		case "expect":
			pk, _ := c.Packet()
			expects = append(expects, expect{c.Line, pk})
			res.expects++
		case "wait":
		default:
			fail("unsupported STF command")
		}
	}
	idx := map[int]int{}
	for _, e := range expects {
		q := got[e.Port]
		i := idx[e.Port]
		if i >= len(q) {
			t.Fatalf("%s:%d: expected packet on port %d, none left", filepath.Base(path), e.line, e.Port)
		}
		idx[e.Port]++
		if !e.Match(q[i]) {
			t.Fatalf("%s:%d: port %d packet mismatch\n got %x\nwant %s", filepath.Base(path), e.line, e.Port, q[i], e.Nibbles)
		}
	}
	var ports []int
	for p := range got {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	for _, p := range ports {
		if n := len(got[p]) - idx[p]; n > 0 {
			t.Fatalf("%s: %d unexpected packet(s) on port %d, first %x", filepath.Base(path), n, p, got[p][idx[p]])
		}
	}
	return res
}

func isRoCE(f []byte) bool {
	return len(f) >= minRoCE && f[12] == 8 && f[13] == 0 && f[offIP] == 0x45 && f[offIP+9] == 17 &&
		f[offUDP+2] == 0x12 && f[offUDP+3] == 0xB7
}

func mustNum(s string) uint64 {
	s = strings.TrimSpace(s)
	var v uint64
	var err error
	switch {
	case strings.HasPrefix(s, "0x"):
		v, err = strconv.ParseUint(s[2:], 16, 64)
	case strings.HasPrefix(s, "0b"):
		v, err = strconv.ParseUint(s[2:], 2, 64)
	default:
		v, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		panic(fmt.Sprintf("bad number %q", s))
	}
	return v
}

func shortName(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// parseAction splits "act(a:1, b:2)" spread over fields.
func parseAction(fields []string) (string, map[string]string, error) {
	str := strings.Join(fields, " ")
	if i := strings.Index(str, "="); i >= 0 && !strings.Contains(str[i:], ")") {
		str = str[:i]
	}
	open := strings.IndexByte(str, '(')
	if open < 0 || !strings.HasSuffix(strings.TrimSpace(str), ")") {
		return "", nil, fmt.Errorf("bad action %q", str)
	}
	name := shortName(strings.TrimSpace(str[:open]))
	args := map[string]string{}
	in := strings.TrimSpace(str[open+1 : strings.LastIndexByte(str, ')')])
	if in != "" {
		for _, a := range strings.Split(in, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(a), ":")
			if !ok {
				return "", nil, fmt.Errorf("bad action arg %q", a)
			}
			args[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return name, args, nil
}

func stfAdd(s *Switch, f []string) error {
	table := shortName(f[0])
	f = f[1:]
	keys := map[string]string{}
	var i int
	for i = 0; i < len(f); i++ {
		if strings.Contains(f[i], "(") {
			break
		}
		k, v, ok := strings.Cut(f[i], ":")
		if !ok { // priority
			continue
		}
		keys[shortName(k)] = v
	}
	act, args, err := parseAction(f[i:])
	if err != nil {
		return err
	}
	num := func(m map[string]string, k string) uint64 {
		v, ok := m[k]
		if !ok {
			panic(fmt.Sprintf("missing %q", k))
		}
		return mustNum(v)
	}
	switch table + "/" + act {
	case "ina_worker/set_worker":
		return s.AddWorker(WorkerEntry{Port: int(num(keys, "port")), QP: uint32(num(keys, "qp")),
			Job: uint16(num(args, "job")), Worker: uint8(num(args, "worker")), RID: uint16(num(args, "rid"))})
	case "ina_worker/set_ps":
		return s.AddWorker(WorkerEntry{Port: int(num(keys, "port")), QP: uint32(num(keys, "qp")),
			Job: uint16(num(args, "job")), PS: true})
	case "ina_job/set_job":
		return s.SetJob(JobSpec{ID: uint16(num(keys, "job")), Mask: uint32(num(args, "mask")),
			Group: uint16(num(args, "group")), PSPort: int(num(args, "ps_port")), ResultToPS: num(args, "to_ps") != 0,
			Priority: uint8(num(args, "prio")), PolicyID: int(num(args, "policy")), PoolID: uint16(num(args, "pool")),
			ReclaimHeld: num(args, "reclaim_held") != 0, Budget: int(num(args, "budget"))})
	case "ina_pool/set_pool":
		stride := int(num(args, "stride"))
		return s.SetPool(uint16(num(keys, "pool")), int(num(args, "base")), int(num(args, "aggs"))*stride, stride)
	case "ina_egress/set_dst":
		var rw Rewrite
		putMAC(&rw.SrcMAC, num(args, "smac"))
		putMAC(&rw.DstMAC, num(args, "dmac"))
		rw.SrcIP = addr4(num(args, "sip"))
		rw.DstIP = addr4(num(args, "dip"))
		rw.DstQP = uint32(num(args, "qp"))
		s.SetRewrite(uint16(num(keys, "rid")), rw)
		return nil
	case "l2_fwd/forward":
		var m [6]byte
		putMAC(&m, num(keys, "dmac"))
		return s.AddL2(m, int(num(args, "port")))
	case "ipv4_lpm/forward":
		pfx, err := stfPrefix(keys["dst"])
		if err != nil {
			return err
		}
		return s.AddRoute(pfx, int(num(args, "port")))
	}
	return fmt.Errorf("unsupported table/action %s/%s", table, act)
}

func stfSetDefault(s *Switch, f []string) error {
	table := shortName(f[0])
	act, args, err := parseAction(f[1:])
	if err != nil {
		return err
	}
	switch table + "/" + act {
	case "ipv4_lpm/forward":
		s.SetDefaultPort(int(mustNum(args["port"])))
		return nil
	case "ipv4_lpm/drop":
		s.SetDefaultPort(-1)
		return nil
	}
	return fmt.Errorf("unsupported default %s/%s", table, act)
}

func putMAC(m *[6]byte, v uint64) {
	for i := 0; i < 6; i++ {
		m[i] = byte(v >> (8 * (5 - i)))
	}
}

// stfPrefix reads an ipv4_lpm key in either form p4c's STF runners know:
// value/length (0x0b000000/8; p4c's runner from 1.2.4.3 on cannot parse it)
// or a value whose trailing hex digits are wildcards (0x0b******: every
// runner), the prefix length four bits per written digit.
func stfPrefix(key string) (netip.Prefix, error) {
	if v, l, ok := strings.Cut(key, "/"); ok {
		bits, err := strconv.Atoi(l)
		if err != nil || bits < 0 || bits > 32 {
			return netip.Prefix{}, fmt.Errorf("lpm key %q: prefix length %q, want 0-32", key, l)
		}
		a, err := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 32)
		if err != nil || !strings.HasPrefix(v, "0x") {
			return netip.Prefix{}, fmt.Errorf("lpm key %q: value %q, want 0x and 8 hex digits", key, v)
		}
		return netip.PrefixFrom(addr4(a), bits), nil
	}
	digits, ok := strings.CutPrefix(key, "0x")
	if !ok || len(digits) != 8 {
		return netip.Prefix{}, fmt.Errorf("lpm key %q: want 0x and 8 hex digits or *, or value/length", key)
	}
	n := strings.IndexByte(digits, '*')
	if n < 0 {
		n = len(digits)
	}
	if strings.Trim(digits[n:], "*") != "" {
		return netip.Prefix{}, fmt.Errorf("lpm key %q: a wildcard * may only stand for trailing digits", key)
	}
	var a uint64
	if n > 0 {
		var err error
		if a, err = strconv.ParseUint(digits[:n], 16, 32); err != nil {
			return netip.Prefix{}, fmt.Errorf("lpm key %q: %w", key, err)
		}
	}
	return netip.PrefixFrom(addr4(a<<(4*(8-n))), 4*n), nil
}

func addr4(v uint64) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func stfFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../testdata/stf/*.stf")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSTF runs every vector in testdata/stf against the Go switch.
func TestSTF(t *testing.T) {
	files := stfFiles(t)
	if len(files) < 20 {
		t.Fatalf("%d STF vectors, want at least 20 (go test -run TestGenerateSTF -update)", len(files))
	}
	var regs, expects int
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".stf"), func(t *testing.T) {
			r := runSTF(t, f)
			if r.packets == 0 {
				t.Fatal("vector sends no packet")
			}
			regs, expects = regs+r.registers, expects+r.expects
		})
	}
	if regs == 0 || expects == 0 {
		t.Fatalf("%d register reads and %d expected packets checked in all: the reader lost them", regs, expects)
	}
}

// TestSTFRunnerDetectsMismatch makes sure the runner fails on a wrong
// expectation, a wrong register value and an unexpected packet.
func TestSTFRunnerDetectsMismatch(t *testing.T) {
	src, err := os.ReadFile("../testdata/stf/03_last_contribution_multicast.stf")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	mutate := map[string]func([]string) []string{
		"value": func(l []string) []string {
			for i, s := range l {
				if strings.HasPrefix(s, "expect 2 ") {
					l[i] = strings.Replace(s, " a108", " a109", 1)
					return l
				}
			}
			t.Fatal("no expect line")
			return l
		},
		"register": func(l []string) []string {
			for i, s := range l {
				if strings.HasPrefix(s, "register_read") {
					l[i] = s[:strings.Index(s, "# expect")] + "# expect 0x5"
				}
			}
			return l
		},
		"unexpected": func(l []string) []string {
			var out []string
			for _, s := range l {
				if !strings.HasPrefix(s, "expect 3 ") {
					out = append(out, s)
				}
			}
			return out
		},
	}
	for name, m := range mutate {
		p := filepath.Join(t.TempDir(), name+".stf")
		if err := os.WriteFile(p, []byte(strings.Join(m(append([]string(nil), lines...)), "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		ft := &fakeT{}
		func() {
			defer func() {
				if r := recover(); r != nil && r != errFakeFatal {
					panic(r)
				}
			}()
			runSTF(ft, p)
		}()
		if !ft.failed {
			t.Errorf("%s: mutated vector passed", name)
		}
	}
}

// TestSTFPrefix: both LPM key forms read the same prefix; malformed keys
// are refused.
func TestSTFPrefix(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"0x0b******", "11.0.0.0/8"},
		{"0x0b000000/8", "11.0.0.0/8"},
		{"0x0a0b****", "10.11.0.0/16"},
		{"0x0a0b0c0d", "10.11.12.13/32"},
		{"0x********", "0.0.0.0/0"},
		{"0x0a0b0c0d/32", "10.11.12.13/32"},
		{"0xc0a8010*", "192.168.1.0/28"},
	} {
		p, err := stfPrefix(c.key)
		if err != nil || p.String() != c.want {
			t.Errorf("%s: %v %v, want %s", c.key, p, err, c.want)
		}
	}
	for _, bad := range []string{"", "0x0b", "0x0b*****", "0x0b***0**", "0x0b******0", "11.0.0.0/8", "0x0b000000/33", "0x0b000000/x", "0xzz******", "0b******"} {
		if p, err := stfPrefix(bad); err == nil {
			t.Errorf("%q read as %v, want an error", bad, p)
		}
	}
}
