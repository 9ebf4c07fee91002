package sw

import "testing"

// TestJobSlots: the slots each job's aggregators hold are counted per
// job — claimed while a partial sum builds, busy until the PS's ACK frees
// them (hashed) — and the shared pool's totals are their sum.
func TestJobSlots(t *testing.T) {
	s := newTestSwitch(t, 64)
	if err := s.SetPool(1, 0, 64, 1); err != nil {
		t.Fatal(err)
	}
	installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
	installJob(t, s, 2, 2, StageHashed, 1, 0, 41)
	v := make([]int32, 64)
	// job 1: chunk 0 complete (both workers), chunk 1 partial; job 2:
	// chunk 0 partial.
	run(s, workerPkt(1, 1, 0, 0, v).build(), workerPkt(1, 1, 0, 1, v).build(), workerPkt(1, 1, 1, 0, v).build(),
		workerPkt(2, 1, 0, 0, v).build())
	c1, b1 := s.JobSlots(1)
	c2, b2 := s.JobSlots(2)
	if c1 != 1 || b1 != 2 || c2 != 1 || b2 != 1 {
		t.Errorf("job 1 claimed %d busy %d (want 1, 2); job 2 claimed %d busy %d (want 1, 1)", c1, b1, c2, b2)
	}
	st := s.Stats()
	if st.SlotsClaimed != c1+c2 || st.SlotsClaimed+st.SlotsComplete != b1+b2 {
		t.Errorf("totals %+v against per job %d+%d, %d+%d", st, c1, c2, b1, b2)
	}
	s.ResetSlots(0, 64)
	if c, b := s.JobSlots(1); c != 0 || b != 0 {
		t.Errorf("after a reset job 1 holds %d, %d", c, b)
	}
	if c, b := s.JobSlots(9); c != 0 || b != 0 {
		t.Errorf("an unknown job holds %d, %d", c, b)
	}
}
