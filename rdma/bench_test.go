package rdma

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
)

var benchSizes = []int{64, 1024, 4096}

func BenchmarkEncode(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := testHeader(OpSendOnly)
			payload := make([]byte, n)
			buf := make([]byte, h.Len(n))
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				h.PSN++
				if _, err := h.Encode(buf, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode is the receive path of one frame: ICRC check and parse.
func BenchmarkDecode(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := testFrame(b, OpSendOnly, make([]byte, n))
			var fr Frame
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if !CheckICRC(f) {
					b.Fatal("bad ICRC")
				}
				if err := fr.Parse(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	f := testFrame(b, OpRDMAWriteOnlyImm, make([]byte, 1024))
	var fr Frame
	b.ReportAllocs()
	for b.Loop() {
		if err := fr.Parse(f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBTHLayerDecode(b *testing.B) {
	f := testFrame(b, OpRDMAWriteOnlyImm, make([]byte, 1024))
	var l BTHLayer
	b.ReportAllocs()
	for b.Loop() {
		if err := l.DecodeFromBytes(f[HeadersLen:], nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGoodput measures one QP pair's goodput over an in-memory link:
// the requester's frames go straight into the responder (and the ACKs
// back), dropped with the given probability, in virtual time. Messages are
// 16 packets long. Gbps is payload bits delivered per wall-clock second,
// with both QPs running on one core.
func BenchmarkGoodput(b *testing.B) {
	for _, mtu := range []int{1024, 4096} {
		for _, loss := range []float64{0, 0.01} {
			name := fmt.Sprintf("mtu=%d/loss=%g", mtu, loss)
			b.Run(name, func(b *testing.B) { benchGoodput(b, mtu, loss) })
		}
	}
}

func benchGoodput(b *testing.B, mtu int, loss float64) {
	ca, cb := qpConfigs(mtu, PSNMask-1000, 0)
	ca.Timeout = 1 // 8.2 µs of virtual time
	ca.Memory, cb.Memory = nil, nil
	qa, err := NewQP(ca)
	if err != nil {
		b.Fatal(err)
	}
	qb, err := NewQP(cb)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	msgLen := 16 * mtu
	data := make([]byte, msgLen)
	buf := make([]byte, qa.MaxFrameLen())
	var now time.Duration
	posted, delivered := 0, 0
	target := b.N
	b.SetBytes(int64(msgLen))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for delivered < target {
		for posted < target && qa.Outstanding() < 32 {
			if err := qa.PostSend(WorkRequest{ID: uint64(posted), Data: data}); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		sent := false
		for {
			n := qa.PollTransmit(now, buf)
			if n == 0 {
				break
			}
			sent = true
			now += time.Duration(n) * 8 / 100 // 100 Gbps serialization
			if loss == 0 || rng.Float64() >= loss {
				_ = qb.Receive(now, buf[:n])
				for {
					c, ok := qb.PollCompletion()
					if !ok {
						break
					}
					if c.ByteLen != msgLen {
						b.Fatal("short message")
					}
					delivered++
				}
			}
		}
		for {
			n := qb.PollTransmit(now, buf)
			if n == 0 {
				break
			}
			if loss == 0 || rng.Float64() >= loss {
				_ = qa.Receive(now, buf[:n])
			}
		}
		for {
			if _, ok := qa.PollCompletion(); !ok {
				break
			}
		}
		if !sent {
			if at, ok := qa.NextTimeout(); ok {
				now = max(now, at)
				qa.HandleTimeout(now)
			}
		}
		if qa.State() != StateRTS {
			b.Fatal(qa.Err())
		}
	}
	el := time.Since(start)
	b.ReportMetric(float64(delivered)*float64(msgLen)*8/el.Seconds()/1e9, "Gbps")
	b.ReportMetric(float64(el.Nanoseconds())/float64(delivered*16), "ns/pkt")
}

// BenchmarkEncodeUC compares encoding a UC SEND Only directly with the
// method it replaces (encode the RC twin, patch the opcode, SetICRC).
func BenchmarkEncodeUC(b *testing.B) {
	for _, n := range benchSizes {
		for _, way := range []string{"direct", "patch"} {
			b.Run(fmt.Sprintf("%s/%d", way, n), func(b *testing.B) {
				h := testHeader(OpUCSendOnly)
				payload := make([]byte, n)
				buf := make([]byte, h.Len(n))
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					h.PSN++
					var err error
					if way == "direct" {
						_, err = h.Encode(buf, payload)
					} else {
						_, err = refPatchUC(h, buf, payload)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkUCPayload compares UCPayload with the copy it replaces
// (host/baseline ucPayload) on a 1 KiB UC SEND Only.
func BenchmarkUCPayload(b *testing.B) {
	f := testFrame(b, OpUCSendOnly, make([]byte, 1024))
	b.Run("UCPayload", func(b *testing.B) {
		b.SetBytes(1024)
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := UCPayload(f); !ok {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("old", func(b *testing.B) {
		b.SetBytes(1024)
		b.ReportAllocs()
		for b.Loop() {
			if pl, _ := refUCPayloadBaseline(f); pl == nil {
				b.Fatal("rejected")
			}
		}
	})
}

// BenchmarkRoCEPayload compares the RoCE view's header checks with the
// switch's raw-offset parser they replace.
func BenchmarkRoCEPayload(b *testing.B) {
	f := testFrame(b, OpUCSendOnly, make([]byte, 256))
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := RoCE(f)
			if _, _, ok := r.Payload(); !ok || !inaOpcode(r.BTH().Opcode()) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := refSwitchParse(f); !ok {
				b.Fatal("rejected")
			}
		}
	})
}

// BenchmarkCheckICRC is the ICRC check the switch makes on every INA frame,
// for the payloads of 64 and 256 INA values (20 B INA header + 4 B each),
// beside its anchor in the same run: the standard library's CRC-32 over the
// same bytes (anchor=crc32), the least any ICRC check can cost.
func BenchmarkCheckICRC(b *testing.B) {
	for _, values := range []int{64, 256} {
		f := testFrame(b, OpUCSendOnly, make([]byte, 20+4*values))
		b.Run(fmt.Sprintf("values=%d", values), func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				if !CheckICRC(f) {
					b.Fatal("bad ICRC")
				}
			}
		})
		b.Run(fmt.Sprintf("values=%d/anchor=crc32", values), func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += crc32.ChecksumIEEE(f[EthLen:])
			}
			_ = sink
		})
	}
}
