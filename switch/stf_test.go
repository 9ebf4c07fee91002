package sw

import (
	"bytes"
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
	"github.com/inabox/inabox/switch/inahdr"
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
// reads see the state at their position in the file. Every RoCEv2 frame
// the Go switch changed must also carry a correct ICRC.

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
	st := &stfSwitch{s: s}
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
			if err := st.add(fields); err != nil {
				fail("%v", err)
			}
		case "setdefault":
			if err := st.setDefault(fields); err != nil {
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
			in := append([]byte(nil), pk.Data...)
			outs, err := st.packet(pk.Data, pk.Port)
			if err != nil {
				fail("%v", err)
			}
			for _, o := range outs {
				// A frame the switch changed carries a correct ICRC; one
				// it forwards unchanged keeps its own.
				if !bytes.Equal(o.frame, in) && rdma.CheckICRC(o.frame) != isRoCE(o.frame) {
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

// stfSwitch is the Go switch under an STF vector, with what the P4 twin
// keeps in tables and the Go switch elsewhere: FreeINA's lease table (a
// slot stage, created by the first job whose policy is StageCustom or
// above) and the door of the control plane (Node; ina_ctl's default
// action opens it).
type stfSwitch struct {
	s  *Switch
	fi *FreeINA
	// ctl: control frames for the switch on QP ctlQPN that the data plane
	// admits leave on port cpu (the CPU port), unchanged.
	ctl     bool
	ctlQPN  uint32
	cpuPort int
	// secured are the ports of port_secured, macs the (port, MAC) pairs of
	// port_mac without any_ip, true once a port_source entry backs them
	// (the Go switch keeps only sources: SetPortSource, AddPortSource).
	secured map[int]bool
	macs    map[portMAC]bool
	// psRID is each FreeINA job's PS member (set_job's ps_rid): where the
	// control plane's messages to the job go besides its group.
	psRID map[uint16]uint16
}

type portMAC struct {
	port int
	mac  [6]byte
}

// packet runs one frame arriving on port and returns the frames out; it
// fails if the tables written so far are port security the Go switch
// cannot hold as the twin does (checkSources).
func (st *stfSwitch) packet(data []byte, port int) ([]out, error) {
	if err := st.checkSources(); err != nil {
		return nil, err
	}
	if st.ctl && port == st.cpuPort {
		return st.packetOut(data), nil
	}
	if st.ctl {
		switch _, door := st.s.admitCtl(data, false, port, st.ctlQPN); door {
		case ctlNotMine:
		case ctlAdmitted:
			return []out{{st.cpuPort, append([]byte(nil), data...), ReasonNone}}, nil
		default:
			return nil, nil
		}
	}
	return runBatch(st.s, []Frame{{Data: data, InPort: port}}), nil
}

// packetOut is a frame the control plane sends from the CPU port: a
// control message to its INA header's job, replicated as CtlEnv.SendJob
// (FreeINA's and DynaINA's: the job's group and its PS) or SendGroup (the
// job's group) does, each replica through EgressUC; nothing for a job the
// switch does not know.
func (st *stfSwitch) packetOut(data []byte) []out {
	ina := rdma.HeadersLen + rdma.BTHLen
	if len(data) < ina+inahdr.Len || !inahdr.Header(data[ina:]).IsCtl() {
		return nil
	}
	id := inahdr.Header(data[ina:]).Job()
	j := st.s.jobByID(id)
	if j == nil {
		return nil
	}
	var ps *McastMember // SendJob's PS member (FreeINA, DynaINA), or none (SendGroup)
	if rid, ok := st.psRID[id]; ok {
		ps = &McastMember{RID: rid, Port: j.PSPort}
	}
	var res []out
	for _, m := range st.s.ctlMembers(nil, j.Group, ps) {
		c := append([]byte(nil), data...)
		st.s.EgressUC(c, m)
		res = append(res, out{m.Port, c, ReasonNone})
	}
	return res
}

func (st *stfSwitch) add(f []string) error {
	s := st.s
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
		// ps_group (the job's group plus its PS, node ps_rid) exists in
		// the twin only: the Go switch sends the PS's copy of a result
		// itself (ActForwardMulticast), and its control plane names the
		// PS's member (FreeINAJob.PSRID) when it sends to the job.
		js := JobSpec{ID: uint16(num(keys, "job")), Mask: uint32(num(args, "mask")),
			Group: uint16(num(args, "group")), PSPort: int(num(args, "ps_port")), ResultToPS: num(args, "to_ps") != 0,
			Priority: uint8(num(args, "prio")), PolicyID: int(num(args, "policy")), PoolID: uint16(num(args, "pool")),
			ReclaimHeld: num(args, "reclaim_held") != 0, Budget: int(num(args, "budget")), Window: uint16(num(args, "window"))}
		if js.PolicyID >= StageCustom {
			if err := st.freeINA(js.PolicyID, js.PoolID); err != nil {
				return err
			}
			if st.psRID == nil {
				st.psRID = map[uint16]uint16{}
			}
			st.psRID[js.ID] = uint16(num(args, "ps_rid"))
		}
		return s.SetJob(js)
	case "ina_lease/set_lease":
		if st.fi == nil {
			return errors.New("ina_lease: no FreeINA job installed")
		}
		p := st.fi.pool
		base, n := int(num(args, "base")), int(num(args, "aggs"))
		if base < p.Base || (base-p.Base)%p.Stride != 0 {
			return fmt.Errorf("ina_lease: base %d is not an aggregator of pool %d (base %d, stride %d)", base, st.fi.cfg.PoolID, p.Base, p.Stride)
		}
		if _, ok := st.fi.Install(0, uint16(num(keys, "job")), uint16(num(keys, "allreduce")), uint32(num(args, "chunks")), (base-p.Base)/p.Stride, n); !ok {
			return fmt.Errorf("ina_lease: %d aggregators from slot %d are not free in pool %d", n, base, st.fi.cfg.PoolID)
		}
		return nil
	case "port_secured/port_secure":
		if st.secured == nil {
			st.secured = map[int]bool{}
		}
		st.secured[int(num(keys, "port"))] = true
		return nil
	case "port_mac/source_mac":
		k := portMAC{port: int(num(keys, "port"))}
		putMAC(&k.mac, num(keys, "smac"))
		if num(args, "any_ip") != 0 {
			return s.AddPortSource(k.port, PortSource{MAC: k.mac})
		}
		if st.macs == nil {
			st.macs = map[portMAC]bool{}
		}
		st.macs[k] = false // no address yet
		return nil
	case "port_source/source_ip":
		k := portMAC{port: int(num(keys, "port"))}
		putMAC(&k.mac, num(keys, "smac"))
		if _, ok := st.macs[k]; !ok {
			return errors.New("port_source: no port_mac entry of that port and MAC with any_ip 0")
		}
		st.macs[k] = true
		return s.AddPortSource(k.port, PortSource{MAC: k.mac, IP: addr4(num(keys, "sip"))})
	case "ina_member/set_member":
		// The Go switch derives the JOIN/LEAVE check from ina_worker
		// (isWorkerPort); the twin's control plane writes ina_member
		// beside it. The entry must name an installed worker.
		if !s.isWorkerPort(int(num(keys, "port")), uint16(num(keys, "job")), int(num(keys, "rank"))) {
			return errors.New("ina_member: no ina_worker entry of that job and worker on that port")
		}
		return nil
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

// checkSources reports port security the Go switch cannot hold as the
// twin's tables say: a secured port without a source (the twin drops
// everything there, the Go switch nothing), a MAC without its addresses.
func (st *stfSwitch) checkSources() error {
	for p := range st.secured {
		if p < 0 || p >= len(st.s.t.sources) || len(st.s.t.sources[p]) == 0 {
			return fmt.Errorf("port_secured port %d has no source", p)
		}
	}
	for k, backed := range st.macs {
		if !backed {
			return fmt.Errorf("port_mac port %d MAC %x: any_ip 0 and no port_source entry", k.port, k.mac)
		}
	}
	return nil
}

// freeINA registers the vector's lease table as slot stage id over pool,
// once: the Go switch has one lease table per FreeINA pool.
func (st *stfSwitch) freeINA(id int, pool uint16) error {
	if st.fi != nil {
		if st.fi.cfg.PoolID != pool {
			return fmt.Errorf("FreeINA jobs in pools %d and %d: the runner keeps one lease table", st.fi.cfg.PoolID, pool)
		}
		return nil
	}
	fi, err := NewFreeINA(st.s, FreeINAConfig{PoolID: pool})
	if err != nil {
		return err
	}
	if err := st.s.RegisterStage(id, fi); err != nil {
		return err
	}
	st.fi = fi
	return nil
}

func (st *stfSwitch) setDefault(f []string) error {
	s := st.s
	table := shortName(f[0])
	act, args, err := parseAction(f[1:])
	if err != nil {
		return err
	}
	switch table + "/" + act {
	case "ina_ctl/set_ctl":
		st.ctl, st.ctlQPN, st.cpuPort = true, uint32(mustNum(args["qpn"])), int(mustNum(args["cpu_port"]))
		return nil
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
// expectation, a wrong register value, an unexpected packet and port
// security it cannot hold as the twin's tables say.
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
		"port source missing": func(l []string) []string { // a secured MAC left without its address
			for i, s := range l {
				if strings.HasPrefix(s, "add port_source ") {
					return append(l[:i:i], l[i+1:]...)
				}
			}
			t.Fatal("no port_source line")
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
