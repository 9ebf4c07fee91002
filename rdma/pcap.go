package rdma

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Summary counts what DecodePcap saw.
type Summary struct {
	Frames    int            // frames in the capture (those a Filter left out too)
	Shown     int            // frames printed: Frames less Skipped
	RoCE      int            // RoCEv2 frames (UDP port 4791) decoded
	NonRoCE   int            // other frames: counted, not errors
	BadICRC   int            // RoCEv2 frames whose ICRC is wrong
	Malformed int            // RoCEv2 frames that do not parse
	ByOpcode  map[Opcode]int // RoCEv2 frames per opcode
	Skipped   int            // frames a Filter left out: not printed, not in the counts above
}

// DecodeOptions are what DecodePcapWith does besides the transport
// headers.
type DecodeOptions struct {
	// Payload, if set, describes a RoCEv2 payload (non-empty, without pad
	// and ICRC); its description is printed in braces.
	Payload func(payload []byte) string
	// Filter, if set, keeps only the RoCEv2 frames whose payload (possibly
	// empty) it accepts; the others, and every frame that is not a
	// well-formed RoCEv2 frame, are left out: not printed, not counted but
	// in Skipped.
	Filter func(payload []byte) bool
}

// ErrLinkType is wrapped by the error DecodePcap returns for a capture
// whose link type is not Ethernet; the error names the link type.
var ErrLinkType = errors.New("only Ethernet (1) is decoded")

// DecodePcap reads a pcap or pcapng capture from r and writes one line per
// frame to w: addresses, the transport headers (opcode, QP, PSN, AckReq,
// RETH, AETH, ImmDt), the payload length and, if payload is not nil, its
// description of the payload, then the ICRC verdict. It ends with the
// counts. Frames that are not RoCEv2 are listed and counted, not errors.
// A capture of another link type than Ethernet is refused (ErrLinkType,
// naming it).
func DecodePcap(r io.Reader, w io.Writer, payload func([]byte) string) (Summary, error) {
	return DecodePcapWith(r, w, DecodeOptions{Payload: payload})
}

// DecodePcapWith is DecodePcap with options: the payload description and a
// filter of the frames to show. Frame numbers stay those of the capture.
func DecodePcapWith(r io.Reader, w io.Writer, o DecodeOptions) (Summary, error) {
	payload := o.Payload
	sum := Summary{ByOpcode: map[Opcode]int{}}
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return sum, fmt.Errorf("rdma: reading capture header: %w", err)
	}
	var src interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
		LinkType() layers.LinkType
	}
	if bytes.Equal(magic, []byte{0x0A, 0x0D, 0x0D, 0x0A}) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return sum, fmt.Errorf("rdma: pcapng: %w", err)
		}
		src = ng
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return sum, fmt.Errorf("rdma: pcap: %w", err)
		}
		src = pr
	}
	if lt := src.LinkType(); lt != layers.LinkTypeEthernet {
		name := ""
		if n := lt.String(); n != "UnknownLinkType" {
			name = " (" + n + ")"
		}
		return sum, fmt.Errorf("rdma: capture link type %d%s: %w", uint32(lt), name, ErrLinkType)
	}

	var (
		eth  layers.Ethernet
		ip4  layers.IPv4
		udp  layers.UDP
		bth  BTHLayer
		pl   gopacket.Payload
		decl []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &bth, &pl)
	parser.IgnoreUnsupported = true
	bw := bufio.NewWriter(w)
	for {
		data, ci, err := src.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			bw.Flush()
			return sum, fmt.Errorf("rdma: frame %d: %w", sum.Frames+1, err)
		}
		sum.Frames++
		n := sum.Frames
		perr := parser.DecodeLayers(data, &decl)
		isRoCE := false
		gotUDP := false
		for _, t := range decl {
			if t == LayerTypeBTH {
				isRoCE = true
			}
			if t == layers.LayerTypeUDP {
				gotUDP = true
			}
		}
		if o.Filter != nil && (!isRoCE || !o.Filter(bth.Payload)) {
			sum.Skipped++
			continue
		}
		sum.Shown++
		if !isRoCE && gotUDP && (udp.DstPort == UDPPort || udp.SrcPort == UDPPort) {
			sum.RoCE++
			sum.Malformed++
			fmt.Fprintf(bw, "%d %s %s -> %s RoCEv2 malformed: %v\n", n, ci.Timestamp.Format("15:04:05.000000"), ip4.SrcIP, ip4.DstIP, perr)
			continue
		}
		if !isRoCE {
			sum.NonRoCE++
			fmt.Fprintf(bw, "%d non-RoCEv2 frame (%d bytes)\n", n, len(data))
			continue
		}
		sum.RoCE++
		sum.ByOpcode[bth.Opcode]++
		fmt.Fprintf(bw, "%d %s:%d -> %s:%d RRoCE %s len=%d", n, ip4.SrcIP, udp.SrcPort, ip4.DstIP, udp.DstPort, bth.String(), len(bth.Payload))
		if ip4.TOS&3 == 3 {
			fmt.Fprint(bw, " CE")
		}
		if payload != nil && len(bth.Payload) > 0 {
			if s := payload(bth.Payload); s != "" {
				fmt.Fprintf(bw, " {%s}", s)
			}
		}
		want, err := ComputeICRC(data)
		if err != nil {
			sum.Malformed++
			fmt.Fprintf(bw, " MALFORMED(%v)\n", err)
			continue
		}
		if bth.ICRC == want {
			fmt.Fprint(bw, " ICRC ok\n")
		} else {
			sum.BadICRC++
			fmt.Fprintf(bw, " ICRC BAD(got 0x%08x want 0x%08x)\n", bth.ICRC, want)
		}
	}
	if o.Filter != nil {
		fmt.Fprintf(bw, "%d of %d frames shown: %d RoCEv2, %d other, %d bad ICRC, %d malformed\n",
			sum.Shown, sum.Frames, sum.RoCE, sum.NonRoCE, sum.BadICRC, sum.Malformed)
	} else {
		fmt.Fprintf(bw, "%d frames: %d RoCEv2, %d other, %d bad ICRC, %d malformed\n",
			sum.Frames, sum.RoCE, sum.NonRoCE, sum.BadICRC, sum.Malformed)
	}
	for op := 0; op < 256; op++ {
		if c := sum.ByOpcode[Opcode(op)]; c > 0 {
			fmt.Fprintf(bw, "  %-32s %d\n", Opcode(op).String(), c)
		}
	}
	return sum, bw.Flush()
}
