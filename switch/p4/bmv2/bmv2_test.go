package bmv2

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func tinyProgram(t testing.TB) *Program {
	t.Helper()
	f, err := os.Open("testdata/tiny.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := LoadProgram(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCLI: STF table writes become simple_switch_CLI commands with keys
// and parameters in the program's order, lpm and ternary values in the
// CLI's forms and STF priorities inverted; other commands pass through.
func TestCLI(t *testing.T) {
	p := tinyProgram(t)
	cases := []struct{ stf, want string }{
		{"add ina_worker qp:0x100100 port:1 set_worker(rid:100, job:1, worker:0)",
			"table_add MyIngress.ina_worker MyIngress.set_worker 1 0x100100 => 1 0 100"},
		{"add MyIngress.ina_worker port:2 NoAction()", "table_add MyIngress.ina_worker NoAction 2 0 =>"},
		{"add ipv4_lpm dst:0x0b****** forward(port:3)", "table_add MyIngress.ipv4_lpm MyIngress.forward 0x0b000000/8 => 3"},
		{"add ipv4_lpm dst:0x0b000000/8 forward(port:3)", "table_add MyIngress.ipv4_lpm MyIngress.forward 0x0b000000/8 => 3"},
		{"add ipv4_lpm dst:0x0a0b0c0d forward(port:3)", "table_add MyIngress.ipv4_lpm MyIngress.forward 0x0a0b0c0d/32 => 3"},
		{"add acl 5 ethernet.ether_type:0x08** ingress_port:4 MyIngress.drop()",
			"table_add MyIngress.acl MyIngress.drop 0x0800&&&0xff00 4 => 9995"},
		{"setdefault ipv4_lpm forward(port:7)", "table_set_default MyIngress.ipv4_lpm MyIngress.forward 7"},
		{"mc_node_create 100 1 2", "mc_node_create 100 1 2"},
		{"register_read MyIngress.ina_count 8 # expect 0x1", "register_read MyIngress.ina_count 8"},
	}
	for _, c := range cases {
		cmds, err := ParseSTF(strings.NewReader(c.stf))
		if err != nil || len(cmds) != 1 {
			t.Fatalf("%q: %v", c.stf, err)
		}
		got, err := p.CLI(cmds[0])
		if err != nil || got != c.want {
			t.Errorf("%q:\n got %q, %v\nwant %q", c.stf, got, err, c.want)
		}
	}
	bad := map[string]string{
		"add nosuch port:1 NoAction()":                                  "no table",
		"add ina_worker port:1 set_worker(job:1, worker:0)":             "no value for parameter rid",
		"add ina_worker port:1 set_worker(job:1, worker:0, rid:1, x:2)": "has no parameter x",
		"add ina_worker bogus:1 NoAction()":                             "no key of table",
		"add ina_worker port:1 forward(port:1)":                         "no action of table",
		"add ina_worker port:1* NoAction()":                             "wildcards",
		"add acl ethernet.ether_type:8 MyIngress.drop()":                "only hex",
		"add acl ethernet.ether_type:0x08** drop()":                     "ambiguous",
		"add ipv4_lpm dst:11 forward(port:3)":                           "value/length",
		"setdefault ipv4_lpm dst:1 forward(port:7)":                     "takes no key",
		"add ina_worker port:1 NoAction":                                "no action(...)",
		"add acl x5 ethernet.ether_type:0x0800 MyIngress.drop()":        "bad priority",
	}
	for stf, want := range bad {
		cmds, err := ParseSTF(strings.NewReader(stf))
		if err != nil {
			t.Fatalf("%q: %v", stf, err)
		}
		if _, err := p.CLI(cmds[0]); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", stf, err, want)
		}
	}
}

// TestParseSTF: every shipped vector parses, with packets, expects and
// checked register reads; malformed lines are refused with their line.
func TestParseSTF(t *testing.T) {
	files, _ := filepath.Glob("../../../testdata/stf/*.stf")
	if len(files) < 30 {
		t.Fatalf("%d vectors", len(files))
	}
	var packets, expects, regs int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := ParseSTF(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range cmds {
			switch c.Op {
			case "packet":
				packets++
			case "expect":
				expects++
			}
			if _, ok, err := c.Expected(); err != nil {
				t.Fatal(err)
			} else if ok {
				regs++
			}
		}
	}
	if packets == 0 || expects == 0 || regs == 0 {
		t.Fatalf("%d packets, %d expects, %d register checks", packets, expects, regs)
	}
	for _, bad := range []string{"packet x 00", "packet 1 0g", "packet 1", "expect 1 0x", "frobnicate 1", "add t", "\n\nexpect -1 00"} {
		if _, err := ParseSTF(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}

func TestMatch(t *testing.T) {
	e := Packet{Nibbles: "ab*d"}
	for frame, want := range map[string]bool{"\xab\xcd": true, "\xab\x0d\xff": true, "\xab\x0e": false, "\xab": false} {
		if e.Match([]byte(frame)) != want {
			t.Errorf("%x: %v", frame, !want)
		}
	}
	e.Exact = true
	if e.Match([]byte("\xab\x0d\xff")) || !e.Match([]byte("\xab\x0d")) {
		t.Error("exact length")
	}
}

// TestPcapRoundTrip: what the runner writes into a port's FIFO, readPcap
// reads back (BMv2's output files have the same format).
func TestPcapRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.pcap")
	frames := [][]byte{{1, 2, 3}, bytes.Repeat([]byte{9}, 1500)}
	b := pcapHeader()
	for _, f := range frames {
		b = append(b, pcapRecord(f, 1)...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readPcap(path)
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], frames[0]) || !bytes.Equal(got[1], frames[1]) {
		t.Fatalf("%v %v", got, err)
	}
	if err := os.WriteFile(path, b[:len(b)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readPcap(path); err == nil {
		t.Error("truncated file accepted")
	}
}

// TestVectorsOnBMv2 runs every shipped vector on BMv2 when p4c-bm2-ss,
// simple_switch and simple_switch_CLI are on PATH (make p4-difftest runs
// the same with a per-vector report). None of them is packaged in Debian
// 12, so CI skips it.
func TestVectorsOnBMv2(t *testing.T) {
	var missing []string
	for _, tool := range []string{"p4c-bm2-ss", "simple_switch", "simple_switch_CLI"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Skipf("not on PATH: %s (p4c and BMv2 are not packaged in Debian 12; make p4-difftest says what it needs)", strings.Join(missing, ", "))
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "ina.json")
	if out, err := exec.Command("p4c-bm2-ss", "--std", "p4-16", "-o", js, "../ina.p4").CombinedOutput(); err != nil {
		t.Fatalf("p4c-bm2-ss: %v\n%s", err, out)
	}
	f, err := os.Open(js)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := LoadProgram(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../../testdata/stf/*.stf")
	r := &Runner{Program: js, Prog: prog, Dir: dir, Timeout: time.Minute}
	for _, v := range files {
		res, err := r.Run(context.Background(), v)
		var fe *Failure
		switch {
		case errors.As(err, &fe):
			t.Errorf("%s: %v (kept %s)", filepath.Base(v), err, res.WorkDir)
		case err != nil:
			t.Fatalf("%s: %v", filepath.Base(v), err)
		case res.Processed < res.Packets:
			t.Errorf("%s: BMv2 logged %d of %d packets", filepath.Base(v), res.Processed, res.Packets)
		}
	}
}

// TestTablePorts: the ports a runner watches besides those of packet and
// expect lines come from multicast nodes and port-named keys and action
// parameters, once each, in order; other numbers are not ports.
func TestTablePorts(t *testing.T) {
	src := `setdefault ina_ctl set_ctl(qpn:0xc7c7c7, cpu_port:64)
add ina_job job:1 set_job(mask:0x7, group:1, ps_port:40, to_ps:0, prio:0, policy:0, pool:1, reclaim_held:0, budget:0, window:2, ps_group:0)
add ina_worker port:1 qp:0x100100 set_worker(job:1, worker:0, rid:100)
mc_node_create 100 1 7
add l2_fwd dmac:0x020000000030 forward(port:30)
add ipv4_lpm dst:0x0b****** forward(port:0x1f)
register_read MyIngress.ina_owner 5
`
	cmds, err := ParseSTF(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := TablePorts(cmds), []int{1, 7, 30, 31, 40, 64}; !slices.Equal(got, want) {
		t.Fatalf("ports %v, want %v", got, want)
	}
}
