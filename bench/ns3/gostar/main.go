// Command gostar is inabox's side of the star benchmark against ns-3
// (bench/ns3/star.cc, `make vs-ns3`): N senders, each on a 100 Gb/s, 1 µs
// link to a router, which forwards every frame on one more such link to a
// sink. Each sender sends P frames of 308 bytes (Ethernet 14 + IPv4 20 +
// UDP 8 + 266 payload), one every interval (25 ns: at line rate; with
// -paced, N × 25 ns: the sink link just keeps up). Every queue holds N·P+16
// frames, so nothing drops. It prints one line of key=value pairs: the
// frames delivered, packet-hops (2 per frame), the virtual end time, and
// the wall time of the run alone.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/nodes"
)

// router forwards every frame from ports 0..n-1 to port n as an IPv4
// router does: it checks the EtherType and TTL, decrements the TTL and
// patches the header checksum (RFC 1624).
type router struct {
	out     int
	dropped int
}

func (r *router) Start(*emu.Env)         {}
func (r *router) Timer(*emu.Env, uint64) {}
func (r *router) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		b := p.Bytes()
		if port == r.out || len(b) < 34 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[22] <= 1 {
			r.dropped++
			env.Free(p)
			continue
		}
		b[22]--
		sum := uint32(binary.BigEndian.Uint16(b[24:])) + 0x0100
		sum = (sum & 0xffff) + sum>>16
		binary.BigEndian.PutUint16(b[24:], uint16(sum))
		env.Send(r.out, p)
	}
}

// sink counts the UDP frames it receives, per sender, like ns-3's
// UdpServer.
type sink struct {
	frames int
	bytes  int
}

func (s *sink) Start(*emu.Env)         {}
func (s *sink) Timer(*emu.Env, uint64) {}
func (s *sink) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		if b := p.Bytes(); len(b) >= 42 && b[23] == 17 {
			s.frames++
			s.bytes += len(b)
		}
		env.Free(p)
	}
}

func main() {
	n := flag.Int("n", 8, "senders")
	count := flag.Int("p", 100000, "frames per sender")
	paced := flag.Bool("paced", false, "send at 1/N of line rate (no standing queue)")
	maxFrame := flag.Int("maxframe", 0, "packet buffer size (0: the emulator's default)")
	flag.Parse()
	if *n < 1 || *count < 1 {
		fmt.Fprintln(os.Stderr, "gostar: -n and -p must be ≥ 1")
		os.Exit(2)
	}
	const frame = 308
	interval := 25 * time.Nanosecond
	if *paced {
		interval *= time.Duration(*n)
	}
	net := emu.NewNetwork(emu.Config{Seed: 1, MaxFrame: *maxFrame})
	link := emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond, QueuePackets: *n**count + 16}
	sinkEP := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 1, 0}, IP: netip.MustParseAddr("10.1.0.1"), Port: 9}
	sink := &sink{}
	r := &router{out: *n}
	must(net.AddNode("router", *n+1, r))
	must(net.AddNode("sink", 1, sink))
	_, err := net.Connect("router", *n, "sink", 0, link)
	must(err)
	for i := 0; i < *n; i++ {
		ep := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, byte(i + 1)}, IP: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i + 1)}), Port: 9}
		s := nodes.NewTraffic(nodes.TrafficConfig{Local: ep, Remote: sinkEP, Count: *count, FrameBytes: frame, Interval: interval})
		name := fmt.Sprintf("s%d", i)
		must(net.AddNode(name, 1, s))
		_, err := net.Connect(name, 0, "router", i, link)
		must(err)
	}
	t0 := time.Now()
	end, err := net.Run()
	wall := time.Since(t0)
	must(err)
	if sink.frames != *n**count || r.dropped != 0 {
		fmt.Fprintf(os.Stderr, "gostar: delivered %d of %d (router dropped %d)\n", sink.frames, *n**count, r.dropped)
		os.Exit(1)
	}
	fmt.Printf("sim=inabox n=%d p=%d paced=%t delivered=%d hops=%d end_s=%.9f wall_s=%.6f\n",
		*n, *count, *paced, sink.frames, 2*sink.frames, end.Seconds(), wall.Seconds())
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gostar:", err)
		os.Exit(1)
	}
}
