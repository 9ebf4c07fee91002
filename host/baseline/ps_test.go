package baseline

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// TestCover: whatever pieces (complete aggregates, overlapping partial
// sums, repeated single contributions) reach the PS, a result counts every
// worker exactly once, and with every single contribution present a result
// always exists.
func TestCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, count = 6, 3
	for iter := 0; iter < 2000; iter++ {
		contrib := make([][]int32, n)
		want := make([]int32, count)
		for r := range contrib {
			contrib[r] = make([]int32, count)
			for i := range contrib[r] {
				contrib[r][i] = rng.Int32N(2001) - 1000
				want[i] += contrib[r][i]
			}
		}
		mk := func(b uint32) piece {
			v := make([]int32, count)
			for r := 0; r < n; r++ {
				if b&(1<<r) != 0 {
					add32(v, contrib[r])
				}
			}
			return piece{bits: b, vals: v}
		}
		var ps []piece
		for k := rng.IntN(8); k > 0; k-- {
			b := rng.Uint32N(1<<n-1) + 1
			if rng.IntN(10) == 0 {
				b = 1<<n - 1
			}
			ps = append(ps, mk(b))
		}
		sum, single := make([]int32, count), make([]int, n)
		_, _, ok := cover(ps, n, sum, single)
		if ok {
			for i := range want {
				if sum[i] != want[i] {
					t.Fatalf("iter %d: %v: sum %v, want %v", iter, ps, sum, want)
				}
			}
		}
		for r := 0; r < n; r++ { // every worker's raw contribution arrives
			ps = append(ps, mk(1<<r))
		}
		_, _, ok = cover(ps, n, sum, single)
		if !ok {
			t.Fatalf("iter %d: no cover with every single contribution", iter)
		}
		for i := range want {
			if sum[i] != want[i] {
				t.Fatalf("iter %d: sum %v, want %v", iter, sum, want)
			}
		}
	}
}

// psScript is a node on the PS's link that plays the switch: it sends
// frames (one per step, 1 µs apart) and keeps the ACKs that come back.
type psScript struct {
	frames [][]byte // INA payloads
	at     int
	acks   []inahdr.Header
}

func (s *psScript) Start(env *emu.Env) { env.SetTimer(time.Microsecond, 0) }
func (s *psScript) Timer(env *emu.Env, key uint64) {
	if s.at < len(s.frames) {
		ucSend(env, testSwitch, testPS, 7, 7, 0, s.frames[s.at])
		s.at++
		env.SetTimer(env.Now()+time.Microsecond, 0)
	}
}
func (s *psScript) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		if pl, _, ok := rdma.UCPayloadSealed(p.Bytes(), p.Sealed); ok {
			s.acks = append(s.acks, append(inahdr.Header(nil), pl...))
		}
		env.Free(p)
	}
}

var (
	testSwitch = rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1")}
	testPS     = rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.0.0.2")}
)

// inaFrame is an INA payload of job 1 from the switch: chunk 0 of
// all-reduce ar with the given workers' bitmap and one value.
func inaFrame(ar uint16, flags uint8, bits uint32, v int32) []byte {
	b := make([]byte, inahdr.Len+4)
	inahdr.Header(b).Encode(inahdr.Meta{Flags: flags, Job: 1, AllReduce: ar, Count: 1, Bitmap: bits})
	binary.BigEndian.PutUint32(b[inahdr.Len:], uint32(v))
	return b
}

// runPS plays frames to a PS of job 1 with 2 workers and returns it and
// its ACKs.
func runPS(t *testing.T, frames [][]byte) (*PS, []inahdr.Header) {
	t.Helper()
	net := emu.NewNetwork(emu.Config{Seed: 1})
	ps := NewPS(testPS, testSwitch, PSJob{Job: 1, Workers: 2, AckQPN: 7})
	ps.ReAck = time.Nanosecond
	s := &psScript{frames: frames}
	if err := net.AddNode("ps", 1, ps); err != nil {
		t.Fatal(err)
	}
	if err := net.AddNode("sw", 1, s); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Connect("sw", 0, "ps", 0, emu.LinkConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	return ps, s.acks
}

func ackValue(h inahdr.Header) int32 { return int32(binary.BigEndian.Uint32(h.ValueBytes())) }

// TestPSRetiresAllReduces: the ATP/ESA PS drops an all-reduce once both
// workers have been seen in a later one, so its state does not grow with
// the run, an all-reduce id that wraps round gets its own result, and a
// nudge for a dropped all-reduce still gets an ACK (a release: zero
// values), while one for an all-reduce a worker may still be in gets the
// result again.
func TestPSRetiresAllReduces(t *testing.T) {
	var frames [][]byte
	const n = 70000 // ids 1…65535, 1, …: they wrap
	for k := range n {
		frames = append(frames, inaFrame(uint16(k%0xFFFF+1), inahdr.FlagResult, 3, int32(k)))
	}
	nudge := uint8(inahdr.FlagResend | inahdr.FlagOverflow)
	frames = append(frames,
		inaFrame(uint16((n-2)%0xFFFF+1), nudge, 1, 5), // before the floor: released
		inaFrame(uint16((n-1)%0xFFFF+1), nudge, 2, 5)) // the last all-reduce: its result again
	ps, acks := runPS(t, frames)
	if len(acks) != n+2 {
		t.Fatalf("%d ACKs for %d frames", len(acks), n+2)
	}
	for k := range n {
		if h := acks[k]; h.AllReduce() != uint16(k%0xFFFF+1) || ackValue(h) != int32(k) {
			t.Fatalf("ACK %d: all-reduce %d value %d, want %d and %d", k, h.AllReduce(), ackValue(h), k%0xFFFF+1, k)
		}
	}
	rel, again := acks[n], acks[n+1]
	if !rel.Has(inahdr.FlagFromPS|inahdr.FlagResult) || rel.AllReduce() != uint16((n-2)%0xFFFF+1) || ackValue(rel) != 0 {
		t.Errorf("release ACK: flags %#x all-reduce %d value %d", rel.Flags(), rel.AllReduce(), ackValue(rel))
	}
	if ackValue(again) != n-1 {
		t.Errorf("repeated ACK: value %d, want %d", ackValue(again), n-1)
	}
	st := ps.Stats()
	if st.Retired != 1 || st.ReAcks != 1 || st.RetiredAllReduces != n-1 {
		t.Errorf("retired frames %d, re-ACKs %d, retired all-reduces %d; want 1, 1, %d", st.Retired, st.ReAcks, st.RetiredAllReduces, n-1)
	}
	if l := len(ps.jobs[1].ars); l != 1 {
		t.Errorf("%d all-reduces held, want 1", l)
	}
}

// TestPSKeepsWhatAWorkerMayNeed: an all-reduce stays while one worker has
// not been seen past it, however far the other has gone.
func TestPSKeepsWhatAWorkerMayNeed(t *testing.T) {
	var frames [][]byte
	frames = append(frames, inaFrame(1, inahdr.FlagResult, 3, 10))
	for ar := uint16(2); ar < 6; ar++ {
		frames = append(frames, inaFrame(ar, inahdr.FlagCollision, 1, int32(ar))) // worker 0 only
	}
	frames = append(frames, inaFrame(1, inahdr.FlagResend|inahdr.FlagOverflow, 2, 4)) // worker 1, still in 1
	ps, acks := runPS(t, frames)
	last := acks[len(acks)-1]
	if last.AllReduce() != 1 || ackValue(last) != 10 {
		t.Fatalf("worker 1's repeat: all-reduce %d value %d, want 1 and 10", last.AllReduce(), ackValue(last))
	}
	if st := ps.Stats(); st.RetiredAllReduces != 0 || st.Retired != 0 {
		t.Fatalf("retired %d all-reduces, %d frames; want none", st.RetiredAllReduces, st.Retired)
	}
}
