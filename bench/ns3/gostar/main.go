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
	"runtime/pprof"
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

// result is one star run.
type result struct {
	delivered int
	end, wall time.Duration
}

// run builds the star of n senders sending count frames each and runs it.
func run(n, count int, paced bool, maxFrame int) (result, error) {
	const frame = 308
	interval := 25 * time.Nanosecond
	if paced {
		interval *= time.Duration(n)
	}
	net := emu.NewNetwork(emu.Config{Seed: 1, MaxFrame: maxFrame})
	link := emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond, QueuePackets: n*count + 16}
	sinkEP := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, 1, 0}, IP: netip.MustParseAddr("10.1.0.1"), Port: 9}
	sk := &sink{}
	r := &router{out: n}
	if err := net.AddNode("router", n+1, r); err != nil {
		return result{}, err
	}
	if err := net.AddNode("sink", 1, sk); err != nil {
		return result{}, err
	}
	if _, err := net.Connect("router", n, "sink", 0, link); err != nil {
		return result{}, err
	}
	for i := 0; i < n; i++ {
		ep := nodes.Endpoint{MAC: [6]byte{2, 0, 0, 0, byte(i >> 8), byte(i + 1)}, IP: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i + 1)}), Port: 9}
		s := nodes.NewTraffic(nodes.TrafficConfig{Local: ep, Remote: sinkEP, Count: count, FrameBytes: frame, Interval: interval})
		name := fmt.Sprintf("s%d", i)
		if err := net.AddNode(name, 1, s); err != nil {
			return result{}, err
		}
		if _, err := net.Connect(name, 0, "router", i, link); err != nil {
			return result{}, err
		}
	}
	t0 := time.Now()
	end, err := net.Run()
	wall := time.Since(t0)
	if err != nil {
		return result{}, err
	}
	if sk.frames != n*count || r.dropped != 0 {
		return result{}, fmt.Errorf("delivered %d of %d (router dropped %d)", sk.frames, n*count, r.dropped)
	}
	return result{delivered: sk.frames, end: end, wall: wall}, nil
}

func main() {
	n := flag.Int("n", 8, "senders")
	count := flag.Int("p", 100000, "frames per sender")
	paced := flag.Bool("paced", false, "send at 1/N of line rate (no standing queue)")
	maxFrame := flag.Int("maxframe", 0, "packet buffer size (0: the emulator's default)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to `FILE`")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	if *n < 1 || *n > 4096 || *count < 1 {
		fmt.Fprintln(os.Stderr, "gostar: -n must be in 1..4096 and -p ≥ 1")
		os.Exit(2)
	}
	res, err := run(*n, *count, *paced, *maxFrame)
	if err != nil {
		pprof.StopCPUProfile()
	}
	must(err)
	fmt.Printf("sim=inabox n=%d p=%d paced=%t delivered=%d hops=%d end_s=%.9f wall_s=%.6f\n",
		*n, *count, *paced, res.delivered, 2*res.delivered, res.end.Seconds(), res.wall.Seconds())
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gostar:", err)
		os.Exit(1)
	}
}
