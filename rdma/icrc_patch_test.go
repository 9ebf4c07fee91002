package rdma

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// resealMatches changes frame's headers by edit (after Save) and checks
// that Reseal leaves the ICRC SetICRC computes (or fails as SetICRC does).
func resealMatches(t *testing.T, frame []byte, edit func(h []byte)) {
	t.Helper()
	var hp HeaderPatch
	hp.Save(frame)
	edit(frame[EthLen : HeadersLen+BTHLen])
	want := append([]byte(nil), frame...)
	werr := SetICRC(want)
	got := append([]byte(nil), frame...)
	if err := hp.Reseal(got); (err != nil) != (werr != nil) {
		t.Fatalf("Reseal: %v, SetICRC: %v", err, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Reseal's ICRC %#x, a full recomputation's %#x (frame % x)",
			binary.LittleEndian.Uint32(got[len(got)-ICRCLen:]), binary.LittleEndian.Uint32(want[len(want)-ICRCLen:]), frame)
	}
}

// TestHeaderPatchProperty: for frames of every length class and opcode
// and random changes of their headers (any byte, the masked ones and the
// lengths included), the incrementally updated ICRC equals a full
// recomputation.
func TestHeaderPatchProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, op := range []Opcode{OpSendOnly, OpUCSendOnly, OpRDMAWriteOnly, OpAck, OpSendOnlyImm} {
		for _, n := range []int{0, 1, 3, 20, 276, 1024, 4096, 9000} {
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			for range 50 {
				f := testFrame(t, op, payload)
				if rng.IntN(4) == 0 {
					f = append(f, 0, 0, 0) // Ethernet padding
				}
				k := 1 + rng.IntN(6)
				resealMatches(t, f, func(h []byte) {
					for range k {
						h[rng.IntN(len(h))] ^= byte(1 + rng.IntN(255))
					}
				})
			}
		}
	}
}

// TestHeaderPatchEgress: the changes a switch's UC egress makes
// (addresses, destination QP, opcode, AckReq, PSN) and none at all.
func TestHeaderPatchEgress(t *testing.T) {
	f := testFrame(t, OpSendOnly, bytes.Repeat([]byte{7}, 276))
	resealMatches(t, f, func(h []byte) {})
	resealMatches(t, f, func(h []byte) {
		r := RoCE(f)
		ip := r.IPv4()
		ip[12+3]++ // source
		ip[16+2] ^= 0x55
		ip.UpdateChecksum()
		b := r.BTH()
		b.SetOpcode(OpUCSendOnly)
		b.SetDestQP(0xABCDEF)
		b.SetAckReq(false)
		b.SetPSN(0x123456)
		b[4] = 0xC0 // FECN, BECN: masked
	})
}

// TestHeaderPatchNotRoCE: Save of a frame that is not RoCE makes Reseal
// recompute in full, and Reseal refuses a frame that is not RoCE.
func TestHeaderPatchNotRoCE(t *testing.T) {
	f := testFrame(t, OpSendOnly, []byte("abcd"))
	var hp HeaderPatch
	hp.Save(f[:10])
	g := append([]byte(nil), f...)
	binary.LittleEndian.PutUint32(g[len(g)-ICRCLen:], 0)
	if err := hp.Reseal(g); err != nil || !bytes.Equal(g, f) {
		t.Fatalf("Reseal after a failed Save: %v, frame % x, want % x", err, g, f)
	}
	if err := hp.Reseal(g[:20]); err == nil {
		t.Fatal("Reseal of a short frame: no error")
	}
}

// FuzzHeaderPatch: any header change of any frame.
func FuzzHeaderPatch(f *testing.F) {
	f.Add([]byte("payload"), uint8(OpSendOnly), []byte{30, 1, 47, 0xFF})
	f.Fuzz(func(t *testing.T, payload []byte, op uint8, edits []byte) {
		o := Opcode(op)
		if !o.Supported() || len(payload) > 9000 {
			return
		}
		fr := testFrame(t, o, payload)
		resealMatches(t, fr, func(h []byte) {
			for i := 0; i+1 < len(edits); i += 2 {
				h[int(edits[i])%len(h)] ^= edits[i+1]
			}
		})
	})
}

// TestShiftCRC: the table and the multiplication shift alike, and
// shifting the raw CRC of a message over n zero bytes is the raw CRC of
// the message followed by them.
func TestShiftCRC(t *testing.T) {
	raw := func(b []byte) uint32 {
		var c uint32
		for _, x := range b {
			c = slicing8[0][byte(c)^x] ^ c>>8
		}
		return c
	}
	msg := []byte("a switch rewrites headers")
	for _, n := range []int{0, 1, 7, 8, 300, 4097, len(shiftTabs) - 1, len(shiftTabs), len(shiftTabs) + 5} {
		want := raw(append(append([]byte(nil), msg...), make([]byte, n)...))
		if got := shiftCRC(raw(msg), n); got != want {
			t.Fatalf("shift over %d: %#x, want %#x", n, got, want)
		}
	}
}

// TestCheckSealed: a sealed frame's ICRC is not recomputed (a wrong one
// passes), an unsealed one's is, and a malformed frame fails sealed or not.
func TestCheckSealed(t *testing.T) {
	f := testFrame(t, OpUCSendOnly, []byte("abcd"))
	f[len(f)-1] ^= 1
	if CheckSealed(f, false) || !CheckSealed(f, true) {
		t.Fatal("a bad ICRC: sealed must pass, unsealed fail")
	}
	if _, _, ok := UCPayloadSealed(f, false); ok {
		t.Fatal("UCPayloadSealed(bad ICRC, unsealed) passed")
	}
	if pl, _, ok := UCPayloadSealed(f, true); !ok || string(pl) != "abcd" {
		t.Fatalf("UCPayloadSealed(sealed) = %q, %v", pl, ok)
	}
	if CheckSealed(f[:30], true) {
		t.Fatal("a truncated frame passed sealed")
	}
	if _, _, ok := UCPayloadSealed(f[:30], true); ok {
		t.Fatal("UCPayloadSealed(truncated, sealed) passed")
	}
}
