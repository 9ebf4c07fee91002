package dynaina_test

import (
	"fmt"
	"time"

	"github.com/inabox/inabox/switch/dynaina"
)

// The worked example of docs/dynaina.md: four jobs arrive at a switch with
// 2,000 aggregator slots on 100 Gb/s links.
func Example() {
	ms := time.Millisecond
	s, _ := dynaina.New(dynaina.Config{TotalSlots: 2000, LinkBitsPerSecond: 100e9, RTT: 20 * time.Microsecond})
	jobs := []struct {
		name string
		p    dynaina.JobProfile
	}{
		{"bert-large", dynaina.JobProfile{ID: 1, Workers: 8, GradientBytes: 1279 << 20, Compute: 229 * ms}},
		{"resnet50", dynaina.JobProfile{ID: 2, Workers: 8, GradientBytes: 97 << 20, Compute: 323 * ms}},
		{"vgg16", dynaina.JobProfile{ID: 3, Workers: 8, GradientBytes: 528 << 20, Compute: 425 * ms}},
		{"inception", dynaina.JobProfile{ID: 4, Workers: 8, GradientBytes: 91 << 20, Compute: 499 * ms}},
	}
	for _, j := range jobs {
		in, _ := s.Register(0, j.p)
		fmt.Printf("%-10s demand %d slots, all-reduce %v, intensity %.2f -> pool %d\n",
			j.name, in.Demand, in.Comm.Round(100*time.Microsecond), in.Intensity, in.Pool)
	}
	for _, p := range s.Pools() {
		fmt.Printf("pool %d: slots [%d, %d) jobs %v\n", p.ID, p.Range.Base, p.Range.End(), p.Jobs)
	}
	// ResNet50 and Inception share pool 2; their all-reduces meet once.
	d, _ := s.PhaseStart(0, 2, 1)
	fmt.Println("t=0      resnet50 all-reduce:", d.Action, d.Range)
	d, _ = s.PhaseStart(9*ms, 4, 1)
	fmt.Println("t=9ms    inception all-reduce:", d.Action)
	g, _ := s.PhaseEnd(11*ms, 2)
	fmt.Println("t=11ms   resnet50 done; grants:", g[0].Job, g[0].Action, g[0].Range)
	// VGG16 leaves: its pool is freed and merged back into free memory.
	s.Unregister(20*ms, 3)
	fmt.Println("vgg16 leaves: free slots", s.FreeSlots(), "ops", s.Ops["create"], "created,", s.Ops["free"], "freed")
	// Output:
	// bert-large demand 745 slots, all-reduce 140.8ms, intensity 0.61 -> pool 1
	// resnet50   demand 745 slots, all-reduce 10.7ms, intensity 0.03 -> pool 2
	// vgg16      demand 745 slots, all-reduce 58.1ms, intensity 0.14 -> pool 3
	// inception  demand 745 slots, all-reduce 10ms, intensity 0.02 -> pool 2
	// pool 1: slots [0, 745) jobs [1]
	// pool 2: slots [745, 1490) jobs [2 4]
	// pool 3: slots [1490, 2000) jobs [3]
	// t=0      resnet50 all-reduce: grant {745 745}
	// t=9ms    inception all-reduce: queue
	// t=11ms   resnet50 done; grants: 4 grant {745 745}
	// vgg16 leaves: free slots 510 ops 3 created, 1 freed
}
