package rdma_test

import (
	"fmt"
	"net/netip"

	"github.com/inabox/inabox/rdma"
)

func ExampleFrameHeader_Encode() {
	h := rdma.FrameHeader{
		Src:     rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1")},
		Dst:     rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.0.0.2")},
		SrcPort: rdma.SourcePort(0x11), TOS: 2, // ECT(0)
		Opcode: rdma.OpSendOnlyImm, DestQP: 0x22, PSN: 100, AckReq: true, Imm: 7,
	}
	payload := []byte("hello")
	buf := make([]byte, h.Len(len(payload)))
	n, _ := h.Encode(buf, payload)

	var f rdma.Frame
	if err := f.Parse(buf[:n]); err != nil {
		panic(err)
	}
	fmt.Println(n, f.BTH.Opcode(), f.BTH.PSN(), f.BTH.PadCount(), f.ImmDt.Imm(), string(f.Payload), rdma.CheckICRC(buf[:n]))
	// Output: 70 SEND Only with Immediate 100 3 7 hello true
}

func ExampleQP() {
	a := rdma.Endpoint{IP: netip.MustParseAddr("10.0.0.1")}
	b := rdma.Endpoint{IP: netip.MustParseAddr("10.0.0.2")}
	req, _ := rdma.NewQP(rdma.Config{Local: a, Remote: b, QPN: 0x11, RemoteQPN: 0x22, MTU: 1024,
		SendPSN: 0xFFFFFF, RecvPSN: 0, Timeout: 14, RetryCount: 7})
	resp, _ := rdma.NewQP(rdma.Config{Local: b, Remote: a, QPN: 0x22, RemoteQPN: 0x11, MTU: 1024,
		SendPSN: 0, RecvPSN: 0xFFFFFF, Timeout: 14, RetryCount: 7})

	_ = req.PostSend(rdma.WorkRequest{ID: 1, Op: rdma.WRSend, Data: make([]byte, 3000)})
	buf := make([]byte, req.MaxFrameLen())
	for n := req.PollTransmit(0, buf); n > 0; n = req.PollTransmit(0, buf) {
		_ = resp.Receive(0, buf[:n]) // PSNs 0xFFFFFF, 0, 1
	}
	c, _ := resp.PollCompletion()
	fmt.Println(c.Opcode, c.ByteLen)
	for n := resp.PollTransmit(0, buf); n > 0; n = resp.PollTransmit(0, buf) {
		_ = req.Receive(0, buf[:n]) // one ACK for PSN 1
	}
	c, _ = req.PollCompletion()
	fmt.Println(c.Opcode, c.WRID, c.Status)
	// Output:
	// RECV 3000
	// SEND 1 success
}

func ExampleUCPayload() {
	h := rdma.FrameHeader{
		Src:    rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1")},
		Dst:    rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.0.0.2")},
		Opcode: rdma.OpSendOnly.WithTransport(rdma.TransportUC), // rdma.OpUCSendOnly
		DestQP: 0x22, PSN: 7,
	}
	payload := []byte("contribution")
	buf := make([]byte, h.Len(len(payload)))
	n, _ := h.Encode(buf, payload)

	pl, qp, ok := rdma.UCPayload(buf[:n])
	fmt.Println(h.Opcode.Transport(), string(pl), qp, ok)
	_, _, ok = rdma.UCPayload(buf[:n-1]) // truncated
	fmt.Println(ok)
	// Output:
	// UC contribution 34 true
	// false
}

// A switch reads and rewrites a frame in place through the RoCE view.
func ExampleRoCE() {
	h := rdma.FrameHeader{
		Src:    rdma.Endpoint{IP: netip.MustParseAddr("10.0.0.1")},
		Dst:    rdma.Endpoint{IP: netip.MustParseAddr("10.0.0.2")},
		Opcode: rdma.OpUCRDMAWriteOnlyImm, DestQP: 0x22, DMALength: 3,
	}
	frame := make([]byte, h.Len(3))
	n, _ := h.Encode(frame, []byte("sum"))
	r := rdma.RoCE(frame[:n])

	off, end, ok := r.Payload()
	fmt.Println(ok, off, end, string(r[off:end]), r.BTH().DestQP())

	r.IPv4().SetDst(netip.MustParseAddr("10.0.0.3"))
	r.IPv4().UpdateChecksum()
	r.BTH().SetDestQP(0x33)
	_ = rdma.SetICRC(r)
	fmt.Println(r.IPv4().Dst(), r.IPv4().ChecksumOK(), r.BTH().DestQP(), rdma.CheckICRC(r))
	// Output:
	// true 74 77 sum 34
	// 10.0.0.3 true 51 true
}
