package wireshark

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/internal/testenv"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// inaFields are the dissector's fields the tests compare with
// switch/inahdr, frame by frame, in this order.
var inaFields = []string{
	"ina.kind", "ina.version", "ina.flags",
	"ina.flags.collision", "ina.flags.overflow", "ina.flags.resend", "ina.flags.result",
	"ina.flags.from_ps", "ina.flags.partial", "ina.flags.bypass", "ina.flags.ctl",
	"ina.job", "ina.allreduce", "ina.count",
	"ina.chunk", "ina.worker", "ina.exponent", "ina.slot", "ina.bitmap", "ina.value",
	"ina.ctl.op", "ina.ctl.chunks", "ina.ctl.want", "ina.ctl.exact", "ina.ctl.slots",
	"ina.ctl.base", "ina.ctl.ps_chunks", "ina.ctl.chunk", "ina.ctl.rank",
}

// flagBits are the flag fields in bit order (bit 0 first).
var flagBits = []string{"collision", "overflow", "resend", "result", "from_ps", "partial", "bypass", "ctl"}

// inaOpcodes are the BTH opcodes whose payload may be an INA header.
var inaOpcodes = map[rdma.Opcode]bool{
	rdma.OpSendOnly: true, rdma.OpSendOnlyImm: true, rdma.OpRDMAWriteOnly: true, rdma.OpRDMAWriteOnlyImm: true,
	rdma.OpUCSendOnly: true, rdma.OpUCSendOnlyImm: true, rdma.OpUCRDMAWriteOnly: true, rdma.OpUCRDMAWriteOnlyImm: true,
}

// needTshark returns tshark's path, or skips the test when it is absent.
func needTshark(t *testing.T) string {
	t.Helper()
	p := testenv.LookPath(t, "tshark", "apt-get install tshark")
	return p
}

// frameRecord is what tshark printed for one frame.
type frameRecord struct {
	opcode   string            // infiniband.bth.opcode
	info     string            // the Info column
	fields   map[string]string // inaFields
	severity []string          // _ws.expert.severity of every expert item
	malform  string            // _ws.malformed
	luaErr   string            // _ws.lua.error
}

// tsharkINA runs tshark with ina.lua over file and returns one record per
// frame. extra goes before the field options (e.g. "-o", "ina.force:TRUE").
func tsharkINA(t *testing.T, tshark, file string, extra ...string) []frameRecord {
	t.Helper()
	lua, err := filepath.Abs("ina.lua")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-n", "-r", file, "-X", "lua_script:" + lua}
	args = append(args, extra...)
	args = append(args, "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "infiniband.bth.opcode", "-e", "_ws.col.Info", "-e", "_ws.expert.severity", "-e", "_ws.malformed", "-e", "_ws.lua.error")
	for _, f := range inaFields {
		args = append(args, "-e", f)
	}
	var stderr bytes.Buffer
	cmd := testenv.CleanProfile(t, exec.Command(tshark, args...))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	if s := strings.TrimSpace(strings.ReplaceAll(stderr.String(), `Running as user "root" and group "root". This could be dangerous.`, "")); s != "" {
		t.Fatalf("tshark %s: stderr:\n%s", file, s) // a Lua error loading the script lands here
	}
	var recs []frameRecord
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		c := strings.Split(l, "|")
		if len(c) != 5+len(inaFields) {
			t.Fatalf("tshark %s: %d columns in %q", file, len(c), l)
		}
		r := frameRecord{opcode: c[0], info: c[1], malform: c[3], luaErr: c[4], fields: map[string]string{}}
		if c[2] != "" {
			r.severity = strings.Split(c[2], ",")
		}
		for i, f := range inaFields {
			r.fields[f] = c[5+i]
		}
		recs = append(recs, r)
	}
	return recs
}

// goView is what switch/inahdr reads from one frame: the expected
// dissector fields (all "" when the frame carries no INA header), the
// control message's text, and an error when the header is malformed.
type goView struct {
	fields map[string]string
	ctl    string // Ctl.String() of a control message
	err    error
}

// expectINA reads frame with rdma and switch/inahdr and returns what the
// dissector must show.
func expectINA(frame []byte) goView {
	v := goView{fields: map[string]string{}}
	for _, f := range inaFields {
		v.fields[f] = ""
	}
	var fr rdma.Frame
	if fr.Parse(frame) != nil || !inaOpcodes[fr.BTH.Opcode()] || len(fr.Payload) < inahdr.Len || fr.Payload[0] != inahdr.Version {
		return v
	}
	p := fr.Payload
	h := inahdr.Header(p)
	set := func(k string, val any) { v.fields["ina."+k] = fmt.Sprint(val) }
	set("version", fmt.Sprintf("0x%02x", h.Version()))
	set("flags", fmt.Sprintf("0x%02x", h.Flags()))
	for i, name := range flagBits {
		set("flags."+name, (h.Flags()>>i)&1)
	}
	set("job", h.Job())
	set("allreduce", h.AllReduce())
	set("count", h.Count())
	switch {
	case h.IsCtl():
		set("kind", "control")
		c, err := inahdr.DecodeCtl(h)
		v.err, v.ctl = err, c.String() // (DecodeCtl ignores the count: the dissector only warns)
		set("ctl.op", uint8(c.Op))
		switch c.Op {
		case inahdr.CtlAlloc:
			set("ctl.exact", map[bool]int{false: 0, true: 1}[c.Exact])
			set("ctl.want", c.Want)
			set("ctl.chunks", c.Chunks)
		case inahdr.CtlGrant:
			set("ctl.base", c.Base)
			set("ctl.slots", c.Slots)
			set("ctl.chunks", c.Chunks)
		case inahdr.CtlBegin:
			set("ctl.want", c.Want)
			set("ctl.chunks", c.Chunks)
		case inahdr.CtlPlan:
			set("ctl.ps_chunks", c.PSChunks)
			set("ctl.slots", c.Slots)
			set("ctl.chunks", c.Chunks)
		case inahdr.CtlFetch, inahdr.CtlPull:
			set("ctl.chunk", c.Chunk)
		case inahdr.CtlJoin:
			set("ctl.rank", c.Rank)
			set("ctl.want", c.Want)
		case inahdr.CtlLeave:
			set("ctl.rank", c.Rank)
		}
		if len(p) != inahdr.Len && v.err == nil {
			v.err = fmt.Errorf("control message of %d bytes", len(p))
		}
		return v
	case h.IsAbsorbed():
		set("kind", "absorbed")
		if len(p) != inahdr.Len {
			v.err = fmt.Errorf("absorbed marker of %d bytes", len(p))
		}
	default:
		set("kind", "data")
		_, vals, err := inahdr.Decode(p)
		v.err = err
		if err == nil && len(p) != h.Size() {
			v.err = fmt.Errorf("count %d makes %d bytes, the payload has %d", h.Count(), h.Size(), len(p))
		}
		if err == nil {
			s := make([]string, len(vals))
			for i, x := range vals {
				s[i] = strconv.Itoa(int(x))
			}
			set("value", strings.Join(s, ","))
		}
	}
	set("chunk", h.Chunk())
	set("worker", h.Worker())
	set("exponent", h.Exponent())
	set("slot", h.Slot())
	set("bitmap", fmt.Sprintf("0x%08x", h.Bitmap()))
	return v
}

// coverage counts the kinds of INA frames a comparison saw.
type coverage map[string]int

// compareFile checks every frame of file: tshark shows the fields Go reads,
// an INA frame is claimed as INA, a control message is named with its
// fields in the Info column, and no frame is malformed or has an expert
// error. It returns the kinds of frames seen. origin names frame i (from
// 0) in errors.
func compareFile(t *testing.T, tshark, file string, origin func(i int) string) coverage {
	t.Helper()
	frames := testenv.ReadFrames(t, file)
	recs := tsharkINA(t, tshark, file)
	if len(recs) != len(frames) {
		t.Fatalf("%s: tshark read %d frames, Go %d", file, len(recs), len(frames))
	}
	cov := coverage{}
	bad := 0
	for i, fr := range frames {
		want := expectINA(fr)
		r := recs[i]
		var diffs []string
		for _, k := range inaFields {
			if r.fields[k] != want.fields[k] {
				diffs = append(diffs, fmt.Sprintf("%s: tshark %q, inahdr %q", k, r.fields[k], want.fields[k]))
			}
		}
		if want.err != nil {
			diffs = append(diffs, "inahdr: malformed: "+want.err.Error())
		}
		if r.malform != "" || r.luaErr != "" {
			diffs = append(diffs, fmt.Sprintf("malformed %q, Lua error %q", r.malform, r.luaErr))
		}
		for _, s := range r.severity {
			if n, err := strconv.ParseUint(s, 0, 32); err != nil || n >= 0x00800000 { // PI_ERROR
				diffs = append(diffs, "expert severity "+s)
			}
		}
		kind := want.fields["ina.kind"]
		if kind == "control" && !strings.Contains(r.info, "INA "+want.ctl) {
			diffs = append(diffs, fmt.Sprintf("Info %q does not name %q", r.info, want.ctl))
		}
		if len(diffs) > 0 {
			bad++
			if bad <= 5 {
				t.Errorf("%s (opcode %s): %s", origin(i), r.opcode, strings.Join(diffs, "; "))
			}
			continue
		}
		if kind == "" {
			cov["other"]++
			continue
		}
		op, _ := strconv.Atoi(r.opcode)
		tr := rdma.Opcode(op).Transport().String()
		switch kind {
		case "control":
			cov[tr+" "+strings.Fields(want.ctl)[0]]++
		case "data":
			var fl []string
			for _, name := range flagBits {
				if want.fields["ina.flags."+name] == "1" {
					fl = append(fl, name)
				}
			}
			cov[tr+" data ["+strings.Join(fl, ",")+"]"]++
		default:
			cov[tr+" "+kind]++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d frames in all where tshark and inahdr disagree", file, bad)
	}
	return cov
}

// smallDefault is the embedded default scenario with a twentieth of its
// gradients (each job still runs three iterations of tens to hundreds of
// chunks), with the further fields set (PATH, VALUE, ...).
func smallDefault(t *testing.T, set ...string) *scenario.Scenario {
	t.Helper()
	data, err := scenario.Source("")
	if err != nil {
		t.Fatal(err)
	}
	set = append([]string{"scaling.tensor_scale", "0.0001"}, set...)
	for i := 0; i+1 < len(set); i += 2 {
		if data, err = scenario.Override(data, set[i], set[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scenario.Parse("default.yaml", data, scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDissectorOnRuns runs the default scenario (its gradients scaled down
// to keep the test short) with pcaps under three configurations and checks
// every frame of every capture with tshark and ina.lua against
// switch/inahdr:
//   - as shipped (DynaINA, UC path): UC contributions and results, the
//     control messages over UC (PS ↔ switch) and RC (worker ↔ PS);
//   - with 8 aggregator slots and the trim path: the RC path to the PS
//     (FlagBypass), RC contributions and the switch's absorbed markers;
//   - with 8 slots under ATP: collisions and the PS's results.
//
// The last two run one iteration per job.
func TestDissectorOnRuns(t *testing.T) {
	tshark := needTshark(t)
	runs := []struct {
		name, policy string
		s            *scenario.Scenario
	}{
		{"default", "", smallDefault(t)},
		{"trim-8-slots", "", smallDefault(t, "topology.switch.slots", "8", "freeina_path", "trim", "jobs[0].iterations", "1", "jobs[1].iterations", "1")},
		{"atp-8-slots", "atp", smallDefault(t, "topology.switch.slots", "8", "jobs[0].iterations", "1", "jobs[1].iterations", "1")},
	}
	// Each run's captures are checked as one pcap of all their frames
	// (tshark's start-up would cost more than its work on each small file),
	// the runs in parallel.
	var (
		mu  sync.Mutex
		all = coverage{}
	)
	t.Run("runs", func(t *testing.T) {
		for _, r := range runs {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				if _, err := run.Run(r.s, run.Options{Policy: r.policy, PcapDir: dir}); err != nil {
					t.Fatal(err)
				}
				files, err := filepath.Glob(filepath.Join(dir, "*.pcap"))
				if err != nil || len(files) == 0 {
					t.Fatalf("no pcaps (%v)", err)
				}
				var frames [][]byte
				var origin []string
				for _, f := range files {
					fr := testenv.ReadFrames(t, f)
					for i := range fr {
						origin = append(origin, fmt.Sprintf("%s frame %d", filepath.Base(f), i+1))
					}
					frames = append(frames, fr...)
				}
				merged := filepath.Join(t.TempDir(), "all.pcap")
				testenv.WritePcap(t, merged, frames)
				cov := compareFile(t, tshark, merged, func(i int) string { return origin[i] })
				mu.Lock()
				defer mu.Unlock()
				for k, n := range cov {
					all[k] += n
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	var keys []string
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%8d %s", all[k], k)
	}
	for _, k := range []string{
		"UC data []", "UC data [result]", // the INA path
		"RC data [bypass]", "RC data [result,from_ps,bypass]", // the RC path to the PS
		"RC data []", "RC absorbed", // the trim path
		"UC data [collision]", "UC data [result,from_ps]", // ATP
		"UC ALLOC", "UC GRANT", "UC FREE", "RC BEGIN", "RC PLAN", "RC DONE", // control
		"other", // ACKs
	} {
		if all[k] == 0 {
			t.Errorf("no frame of kind %q in the captures", k)
		}
	}
}

// frameBuilder encodes RoCEv2 frames between two fixed endpoints.
type frameBuilder struct {
	t   *testing.T
	psn uint32
}

// frame encodes payload in opcode op (RETH and ImmDt filled in as the
// opcode needs).
func (b *frameBuilder) frame(op rdma.Opcode, payload []byte) []byte {
	b.t.Helper()
	b.psn++
	h := rdma.FrameHeader{
		Src:     rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.1.0.1")},
		Dst:     rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.255.0.1")},
		SrcPort: rdma.SourcePort(0x100), Opcode: op, DestQP: 0x100, PSN: b.psn,
		VA: 0x1000, RKey: 0xB, DMALength: uint32(len(payload)), Imm: 0x01020304,
	}
	buf := make([]byte, h.Len(len(payload)))
	n, err := h.Encode(buf, payload)
	if err != nil {
		b.t.Fatal(err)
	}
	return buf[:n]
}

// allOnly are the eight Only opcodes, RC then UC.
var allOnly = []rdma.Opcode{
	rdma.OpSendOnly, rdma.OpSendOnlyImm, rdma.OpRDMAWriteOnly, rdma.OpRDMAWriteOnlyImm,
	rdma.OpUCSendOnly, rdma.OpUCSendOnlyImm, rdma.OpUCRDMAWriteOnly, rdma.OpUCRDMAWriteOnlyImm,
}

// TestDissectorOpcodes checks the dissector on every INA opcode, RC and
// UC, with and without RETH and ImmDt: a contribution, a result from the
// PS, every control message and an absorbed marker in each; and that it
// leaves alone the payloads that are not INA (other opcodes, another first
// byte).
func TestDissectorOpcodes(t *testing.T) {
	tshark := needTshark(t)
	b := &frameBuilder{t: t}
	contrib := inahdr.Append(nil, inahdr.Meta{Job: 3, AllReduce: 7, Chunk: 70000, Worker: 5, Exponent: -3, Bitmap: 1 << 5},
		[]int32{1, -2, 2147483647, -2147483648, 0})
	result := inahdr.Append(nil, inahdr.Meta{Flags: inahdr.FlagResult | inahdr.FlagFromPS | inahdr.FlagOverflow, Job: 65535,
		AllReduce: 65535, Chunk: 4294967295, Worker: 255, Exponent: 127, Slot: 65535, Bitmap: 0xFFFFFFFF}, []int32{42})
	absorbed := make([]byte, inahdr.Len)
	inahdr.Header(absorbed).Encode(inahdr.Meta{Flags: inahdr.FlagCtl | inahdr.FlagResend, Job: 1, AllReduce: 2, Chunk: 3, Worker: 1, Bitmap: 2})
	ctls := []inahdr.Ctl{
		{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 9, Chunks: 100, Want: 64, Exact: true},
		{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 9, Chunks: 100, Want: 0},
		{Op: inahdr.CtlGrant, Job: 1, AllReduce: 9, Chunks: 100, Slots: 64, Base: 128},
		{Op: inahdr.CtlFree, Job: 1, AllReduce: 9},
		{Op: inahdr.CtlJoin, Job: 3, Rank: 7, Want: 570},
		{Op: inahdr.CtlLeave, Job: 3, Rank: 31},
		{Op: inahdr.CtlLeft, Job: 3},
		{Op: inahdr.CtlBegin, Job: 2, AllReduce: 1, Chunks: 5, Want: 65535},
		{Op: inahdr.CtlPlan, Job: 1, AllReduce: 9, Chunks: 100, Slots: 64, PSChunks: 36},
		{Op: inahdr.CtlFetch, Job: 1, AllReduce: 9, Chunk: 5},
		{Op: inahdr.CtlPull, Job: 1, AllReduce: 9, Chunk: 99},
		{Op: inahdr.CtlDone, Job: 1, AllReduce: 9},
	}
	var frames [][]byte
	for _, op := range allOnly {
		frames = append(frames, b.frame(op, contrib), b.frame(op, result), b.frame(op, absorbed))
		for _, c := range ctls {
			frames = append(frames, b.frame(op, c.Append(nil)))
		}
	}
	// Not INA: the same header in a multi-packet message, a payload of
	// another protocol, a payload too short to be one.
	notINA := [][]byte{
		b.frame(rdma.OpSendFirst, contrib), b.frame(rdma.OpUCSendMiddle, contrib),
		b.frame(rdma.OpSendOnly, []byte("hello, RDMA world: not an INA header")),
		b.frame(rdma.OpUCSendOnly, []byte{0xA1, 0, 0, 1}),
	}
	frames = append(frames, notINA...)
	path := filepath.Join(t.TempDir(), "opcodes.pcap")
	testenv.WritePcap(t, path, frames)
	cov := compareFile(t, tshark, path, func(i int) string { return fmt.Sprintf("frame %d", i+1) })
	want := len(allOnly) * (3 + len(ctls))
	if n := len(frames) - cov["other"]; n != want || cov["other"] != len(notINA) {
		t.Errorf("dissected %d INA frames and %d others, want %d and %d: %v", n, cov["other"], want, len(notINA), cov)
	}
	for _, op := range allOnly {
		tr := op.Transport().String()
		for _, k := range []string{tr + " data []", tr + " data [overflow,result,from_ps]", tr + " absorbed",
			tr + " ALLOC", tr + " GRANT", tr + " FREE", tr + " BEGIN", tr + " PLAN", tr + " FETCH", tr + " PULL", tr + " DONE"} {
			if cov[k] == 0 {
				t.Errorf("%s: no %q frame dissected", op, k)
			}
		}
	}
}

// TestDissectorMalformed checks the expert info: each malformed header is
// flagged with its own expert item (an error, so the filter
// `_ws.malformed || _ws.expert.severity >= error` finds exactly these
// frames), where switch/inahdr rejects the same bytes.
func TestDissectorMalformed(t *testing.T) {
	tshark := needTshark(t)
	b := &frameBuilder{t: t}
	good := func(m inahdr.Meta, n int) []byte { return inahdr.Append(nil, m, make([]int32, n)) }
	meta := inahdr.Meta{Job: 1, AllReduce: 1, Chunk: 1, Worker: 1, Bitmap: 2}
	patch := func(p []byte, f func(inahdr.Header)) []byte { f(inahdr.Header(p)); return p }
	cases := []struct {
		name    string
		payload []byte
		expert  string // the expert field that must be set ("" for none)
		force   bool   // needs the ina.force preference
	}{
		{"valid", good(meta, 4), "", false},
		{"count 0", patch(good(meta, 0), func(h inahdr.Header) {}), "ina.count.bad", false},
		{"count above 1024", patch(good(meta, 1025), func(h inahdr.Header) {}), "ina.count.bad", false},
		{"count beyond the payload", patch(good(meta, 4), func(h inahdr.Header) { h.SetCount(64) }), "ina.count.length", false},
		{"payload beyond the count", patch(good(meta, 4), func(h inahdr.Header) { h.SetCount(3) }), "ina.count.length", false},
		{"payload beyond the count, unaligned (pad)", append(good(meta, 1), 7, 7), "ina.count.length", false},
		{"job 0", patch(good(meta, 4), func(h inahdr.Header) { h.SetJob(0) }), "ina.job.zero", false},
		{"worker 40", patch(good(meta, 4), func(h inahdr.Header) { h.SetWorker(40) }), "ina.worker.range", false},
		{"unknown control opcode", inahdr.Ctl{Op: 7, Job: 1, AllReduce: 1}.Append(nil), "ina.ctl.op.unknown", false},
		{"control with values", append(inahdr.Ctl{Op: inahdr.CtlDone, Job: 1}.Append(nil), 0, 0, 0, 0), "ina.count.length", false},
		{"bad version", patch(good(meta, 4), func(h inahdr.Header) { h.SetVersion(0xA2) }), "ina.version.bad", true},
		{"short header", good(meta, 1)[:12], "ina.short", true},
	}
	var frames [][]byte
	for _, c := range cases {
		frames = append(frames, b.frame(rdma.OpUCSendOnly, c.payload))
		// switch/inahdr agrees: each case but the first is malformed there.
		v := expectINA(frames[len(frames)-1])
		if c.force && v.fields["ina.kind"] != "" {
			t.Errorf("%s: inahdr takes it for an INA header", c.name)
		}
		if !c.force && (v.err != nil) != (c.expert != "") {
			t.Errorf("%s: inahdr error %v", c.name, v.err)
		}
	}
	path := filepath.Join(t.TempDir(), "malformed.pcap")
	testenv.WritePcap(t, path, frames)
	lua, _ := filepath.Abs("ina.lua")
	for _, force := range []bool{false, true} {
		var args []string
		if force {
			args = []string{"-o", "ina.force:TRUE"}
		}
		// The filter of the README finds the malformed frames.
		fargs := append([]string{"-n", "-r", path, "-X", "lua_script:" + lua}, args...)
		fargs = append(fargs, "-Y", "_ws.malformed || _ws.expert.severity >= error", "-T", "fields", "-e", "frame.number")
		out, err := testenv.CleanProfile(t, exec.Command(tshark, fargs...)).Output()
		if err != nil {
			t.Fatalf("tshark %v: %v", fargs, err)
		}
		var got, want []string
		for i, c := range cases {
			if c.expert != "" && (force || !c.force) {
				want = append(want, strconv.Itoa(i+1))
			}
		}
		got = strings.Fields(string(out))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("force=%v: the filter finds frames %v, want %v", force, got, want)
		}
		// Each has its own expert item.
		eargs := append([]string{"-n", "-r", path, "-X", "lua_script:" + lua}, args...)
		eargs = append(eargs, "-T", "fields", "-E", "separator=|", "-e", "ina.kind", "-e", "_ws.expert.message")
		var experts []string
		for _, c := range cases {
			if c.expert != "" && !slices.Contains(experts, c.expert) {
				experts = append(experts, c.expert)
			}
		}
		for _, x := range experts {
			eargs = append(eargs, "-e", x)
		}
		out, err = testenv.CleanProfile(t, exec.Command(tshark, eargs...)).Output()
		if err != nil {
			t.Fatalf("tshark %v: %v", eargs, err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != len(cases) {
			t.Fatalf("tshark printed %d lines for %d frames", len(lines), len(cases))
		}
		for i, c := range cases {
			col := strings.Split(lines[i], "|")
			if c.force && !force {
				if col[0] != "" {
					t.Errorf("%s: claimed without ina.force: %q", c.name, lines[i])
				}
				continue
			}
			for j, x := range experts {
				if set := col[2+j] != ""; set != (x == c.expert) {
					t.Errorf("%s: expert %s set=%v (%q)", c.name, x, set, lines[i])
				}
			}
			t.Logf("force=%v %-26s %s", force, c.name, col[1])
		}
	}
}
