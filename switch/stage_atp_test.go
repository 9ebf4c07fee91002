package sw

import (
	"testing"

	"github.com/inabox/inabox/switch/inahdr"
)

// atpSwitch is a switch with one aggregator and job 1 of three workers on
// stage (its PS on port 40), with or without ResultToPS.
func atpSwitch(t *testing.T, stage int, toPS bool) *Switch {
	t.Helper()
	s := newTestSwitch(t, 16)
	s.SetPool(1, 0, 1, 1)
	installJob(t, s, 1, 3, stage, 1, 1, 40)
	if err := s.SetJob(JobSpec{ID: 1, Mask: 7, Group: 1, PSPort: 40, ResultToPS: toPS, Priority: 1, PolicyID: stage, PoolID: 1}); err != nil {
		t.Fatal(err)
	}
	return s
}

func resendPkt(job, ar uint16, chunk uint32, w uint8, vals []int32) []byte {
	p := workerPkt(job, ar, chunk, w, vals)
	p.meta.Flags = inahdr.FlagResend
	return p.build()
}

// TestATPResendForces: with ResultToPS (ATP, and ESA on ATP's switch), a
// retransmission that finds its chunk's aggregator partial carries the sum
// out to the PS, its own values added if they were missing, and frees the
// aggregator (in-ATP/ATP check_app_id_and_seq_resend, "force forward and
// clean"): FlagPartial with the sum's exact bitmap, or FlagResult if its
// values complete the chunk. Without ResultToPS a counted retransmission
// is a dropped duplicate and an uncounted one is added, as before.
func TestATPResendForces(t *testing.T) {
	for _, stage := range []int{StageHashed, StagePreemptive} {
		s := atpSwitch(t, stage, true)
		tag := MakeTag(1, 1, 0)
		run(s, workerPkt(1, 1, 0, 0, []int32{1, 2}).build(), workerPkt(1, 1, 0, 1, []int32{10, 20}).build())
		// A counted retransmission: the stored sum goes out as is.
		o := run(s, resendPkt(1, 1, 0, 1, []int32{10, 20}))
		if len(o) != 1 || o[0].why != ReasonForced || o[0].port != 40 {
			t.Fatalf("stage %d: counted resend: %+v", stage, o)
		}
		m, v := resultOf(t, o[0])
		if m.Flags&inahdr.FlagPartial == 0 || m.Flags&inahdr.FlagResult != 0 || m.Bitmap != 3 || MakeTag(m.Job, m.AllReduce, m.Chunk) != tag || v[0] != 11 || v[1] != 22 {
			t.Fatalf("stage %d: forced sum %+v %v, want partial, bitmap 3, 11 22", stage, m, v)
		}
		if si := s.Slot(0); si.State != StateFree || si.Owner != 0 || si.Bitmap != 0 {
			t.Fatalf("stage %d: not freed: %+v", stage, si)
		}
		// An uncounted retransmission: added, then out.
		run(s, workerPkt(1, 1, 0, 0, []int32{1, 2}).build())
		o = run(s, resendPkt(1, 1, 0, 2, []int32{100, 200}))
		if m, v := resultOf(t, o[0]); len(o) != 1 || o[0].why != ReasonForced || m.Bitmap != 5 || m.Flags&inahdr.FlagPartial == 0 || v[0] != 101 || v[1] != 202 {
			t.Fatalf("stage %d: uncounted resend: %+v %+v %v", stage, o, m, v)
		}
		// One that completes the chunk: out as a result, the aggregator free
		// (not held).
		run(s, workerPkt(1, 1, 0, 0, []int32{1, 2}).build(), workerPkt(1, 1, 0, 1, []int32{10, 20}).build())
		o = run(s, resendPkt(1, 1, 0, 2, []int32{100, 200}))
		if m, v := resultOf(t, o[0]); len(o) != 1 || o[0].why != ReasonForced || o[0].port != 40 || m.Bitmap != 7 ||
			m.Flags&inahdr.FlagResult == 0 || m.Flags&inahdr.FlagPartial != 0 || v[0] != 111 || v[1] != 222 {
			t.Fatalf("stage %d: completing resend: %+v %+v %v", stage, o, m, v)
		}
		if si := s.Slot(0); si.State != StateFree {
			t.Fatalf("stage %d: completing resend left %+v", stage, si)
		}
		if js, _ := s.JobStats(1); js.Forced != 3 {
			t.Fatalf("stage %d: Forced = %d, want 3", stage, js.Forced)
		}
		if ps, _ := s.PoolStats(1); ps.Releases != 3 {
			t.Fatalf("stage %d: Releases = %d, want 3", stage, ps.Releases)
		}
	}
	// Without ResultToPS (SwitchML, or a contention stage multicasting its
	// results): a counted retransmission is dropped, an uncounted one
	// added.
	for _, stage := range []int{StageStatic, StageHashed} {
		s := atpSwitch(t, stage, false)
		run(s, workerPkt(1, 1, 0, 0, []int32{1, 2}).build())
		if o := run(s, resendPkt(1, 1, 0, 0, []int32{1, 2})); len(o) != 0 || s.Slot(0).Count != 1 {
			t.Fatalf("stage %d without ResultToPS: counted resend %+v, slot %+v", stage, o, s.Slot(0))
		}
		if o := run(s, resendPkt(1, 1, 0, 1, []int32{10, 20})); len(o) != 0 || s.Slot(0).Bitmap != 3 {
			t.Fatalf("stage %d without ResultToPS: uncounted resend %+v, slot %+v", stage, o, s.Slot(0))
		}
		if js, _ := s.JobStats(1); js.Forced != 0 {
			t.Fatalf("stage %d without ResultToPS: Forced = %d", stage, js.Forced)
		}
	}
}

// TestATPAckFreesPartial: with ResultToPS the PS's ACK for a chunk frees
// the chunk's aggregator even while it holds only a partial sum (the PS
// finished the chunk from other pieces; in-ATP/ATP clean_app_id_and_seq),
// and leaves another chunk's aggregator alone. Without ResultToPS a
// partial sum stays.
func TestATPAckFreesPartial(t *testing.T) {
	for _, toPS := range []bool{true, false} {
		s := atpSwitch(t, StageHashed, toPS)
		run(s, workerPkt(1, 1, 0, 0, []int32{1, 2}).build())
		run(s, psAck(1, 1, 1, []int32{5, 5})) // another chunk: left alone
		if si := s.Slot(0); si.State != StateClaimed || si.Owner != MakeTag(1, 1, 0) {
			t.Fatalf("toPS %v: another chunk's ACK changed %+v", toPS, si)
		}
		if o := run(s, psAck(1, 1, 0, []int32{111, 222})); len(o) != 3 || o[0].why != ReasonAck {
			t.Fatalf("toPS %v: ACK %+v", toPS, o)
		}
		si := s.Slot(0)
		switch {
		case toPS && (si.State != StateFree || si.Owner != 0 || si.Bitmap != 0):
			t.Fatalf("ATP: ACK left the partial: %+v", si)
		case !toPS && (si.State != StateClaimed || si.Bitmap != 1):
			t.Fatalf("without ResultToPS the ACK freed the partial: %+v", si)
		}
		// The freed aggregator takes the next chunk afresh, exactly.
		if toPS {
			run(s, workerPkt(1, 1, 2, 0, []int32{1, 1}).build(), workerPkt(1, 1, 2, 1, []int32{2, 2}).build())
			o := run(s, workerPkt(1, 1, 2, 2, []int32{3, 3}).build())
			if m, v := resultOf(t, o[0]); len(o) != 1 || o[0].why != ReasonResult || m.Bitmap != 7 || v[0] != 6 || v[1] != 6 {
				t.Fatalf("next chunk after the release: %+v %+v %v", o, m, v)
			}
		}
	}
}
