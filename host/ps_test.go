package host

import (
	"net/netip"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// Test addresses (the testbed's plan is harness/testbed's; a unit test
// needs only distinct ones).
func testAddr(b byte) rdma.Endpoint {
	return rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, b}, IP: netip.AddrFrom4([4]byte{10, 0, 0, b})}
}

var testQP = rdma.Config{MTU: 4096, RetryCount: 7, MaxUnacked: 128, TOS: 2, Timeout: 7}

func testPS(t *testing.T, n int) (*PS, *psJob) {
	t.Helper()
	var j PSJob
	j.Job = 1
	for r := 0; r < n; r++ {
		j.Workers = append(j.Workers, Peer{Addr: testAddr(byte(10 + r)), QPN: 0x200100 | uint32(r)})
		j.LocalQPN = append(j.LocalQPN, 0x100100|uint32(r))
	}
	p, err := NewPS(PSConfig{Addr: testAddr(2), CtlQPN: 0x400000, Switch: testAddr(1), QP: testQP, INAPath: PathTrim}, j)
	if err != nil {
		t.Fatal(err)
	}
	pj := p.jobs[1]
	// An all-reduce of 4 chunks, planned: chunks 0,1 INA, 2,3 PS path.
	// (reallocAt far away: no re-ALLOC frame, which would need an emu.Env)
	pj.ars[9] = &psAR{id: 9, chunks: 4, planned: true, plan: Plan{Chunks: 4, INA: 2, PS: 2}, ch: make([]psChunk, 4), reallocAt: 1 << 62}
	return p, pj
}

func msg(flags uint8, chunk uint32, w int, vals ...int32) []byte {
	return inahdr.Append(nil, inahdr.Meta{Flags: flags, Job: 1, AllReduce: 9, Chunk: chunk, Worker: uint8(w), Bitmap: 1 << w}, vals)
}

func trimmed(chunk uint32, w int) []byte {
	b := make([]byte, inahdr.Len)
	inahdr.Header(b).Encode(inahdr.Meta{Flags: inahdr.FlagCtl, Job: 1, AllReduce: 9, Chunk: chunk, Worker: uint8(w), Bitmap: 1 << w})
	return b
}

func (p *PS) feed(j *psJob, rank int, b []byte) {
	p.message(nil, psRef{job: j, rank: rank, qp: j.qps[rank]}, b)
}

// TestPSDedup: a raw contribution is counted once; a result is stored
// once; absorbed notices never add; software results go to every worker.
func TestPSDedup(t *testing.T) {
	p, j := testPS(t, 3)
	a := j.ars[9]
	// PS path chunk 2: worker 0 twice (e.g. a pull answered after the
	// original arrived), then 1 and 2.
	p.feed(j, 0, msg(inahdr.FlagBypass, 2, 0, 10, 20))
	p.feed(j, 0, msg(inahdr.FlagBypass|inahdr.FlagResend, 2, 0, 10, 20))
	p.feed(j, 1, msg(inahdr.FlagBypass, 2, 1, 1, 2))
	if a.ch[2].res != nil {
		t.Fatal("result before all contributions")
	}
	p.feed(j, 2, msg(inahdr.FlagBypass, 2, 2, 100, 200))
	h := inahdr.Header(a.ch[2].res)
	if h == nil || h.Value(0) != 111 || h.Value(1) != 222 || h.Bitmap() != 7 || !h.Has(inahdr.FlagResult|inahdr.FlagFromPS) {
		t.Fatalf("PS sum %v", a.ch[2].res)
	}
	if st := p.Stats(); st.Raw != 3 || st.RawDup != 1 || st.SoftResults != 1 || st.ResultsSent != 3 {
		t.Fatalf("stats %+v", st)
	}
	// A late raw contribution after the result changes nothing.
	p.feed(j, 1, msg(inahdr.FlagBypass|inahdr.FlagResend, 2, 1, 1, 2))
	if h.Value(0) != 111 || p.Stats().RawDup != 2 {
		t.Fatal("late raw changed the result")
	}

	// INA chunk 0: absorbed notices (one duplicated), then the switch's
	// result twice; the result is stored once and sent to nobody until
	// fetched.
	p.feed(j, 0, trimmed(0, 0))
	p.feed(j, 0, trimmed(0, 0))
	p.feed(j, 1, trimmed(0, 1))
	p.feed(j, 2, msg(inahdr.FlagResult, 0, 2, 7, 8))
	p.feed(j, 2, msg(inahdr.FlagResult, 0, 2, 99, 99))
	if r := inahdr.Header(a.ch[0].res); r.Value(0) != 7 || p.Stats().SwitchResults != 1 || p.Stats().ResultsSent != 3 {
		t.Fatalf("switch result: %v %+v", a.ch[0].res, p.Stats())
	}
	p.feed(j, 1, ctl(inahdr.Ctl{Op: inahdr.CtlFetch, Job: 1, AllReduce: 9, Chunk: 0}))
	if p.Stats().ResultsSent != 4 {
		t.Fatal("fetch not answered")
	}

	// INA chunk 1: the switch lost the aggregate (reboot): 0 and 1 were
	// absorbed, 2 arrives raw (no lease). Every message delivered and no
	// result: the PS pulls 0 and 1, and sums the raw answers.
	p.feed(j, 0, trimmed(1, 0))
	p.feed(j, 1, trimmed(1, 1))
	p.feed(j, 2, msg(inahdr.FlagCollision, 1, 2, 5, 5))
	if st := p.Stats(); st.Pulls != 2 {
		t.Fatalf("pulls %+v", st)
	}
	// a worker asks meanwhile: answered once the result exists
	p.feed(j, 2, ctl(inahdr.Ctl{Op: inahdr.CtlFetch, Job: 1, AllReduce: 9, Chunk: 1}))
	p.feed(j, 0, msg(inahdr.FlagBypass|inahdr.FlagResend, 1, 0, 1, 1))
	p.feed(j, 1, msg(inahdr.FlagBypass|inahdr.FlagResend, 1, 1, 2, 2))
	if r := inahdr.Header(a.ch[1].res); r == nil || r.Value(0) != 8 || r.Value(1) != 8 {
		t.Fatalf("fallback sum %v", a.ch[1].res)
	}
	if st := p.Stats(); st.Pulls != 2 || st.SoftResults != 2 || st.ResultsSent != 7 {
		t.Fatalf("after fallback %+v", st)
	}
	if a.fallbacks != 1 {
		t.Fatalf("fallbacks %d", a.fallbacks)
	}
	// Foreign job / finished all-reduce: counted as stale, ignored.
	p.feed(j, 0, inahdr.Append(nil, inahdr.Meta{Job: 1, AllReduce: 77, Chunk: 0, Bitmap: 1}, []int32{1}))
	if p.Stats().Stale != 1 {
		t.Fatal("stale message not ignored")
	}
}
