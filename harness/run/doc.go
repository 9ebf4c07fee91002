// Package run is the experiment runner: a scenario, a policy and a seed in,
// measured and checked results out.
//
// [Run] builds the policy's emulated testbed from the scenario through
// harness/testbed (one worker node per job worker, the switch with the
// scenario's memory, the parameter servers, links at the scaled rates),
// applies its impairments, schedules its faults, optionally captures a pcap
// per link, gives every worker its tensors (deterministic from the seed, at
// the scaled gradient size), and steps virtual time until every job has done
// its iterations or the time limit ([ErrUnfinished]). Each job arrives, then
// per iteration computes (the model's compute time) and all-reduces its
// gradient. Every all-reduce result of every worker is checked exactly
// against a reference sum computed here: a wrong sum is an error, never a
// result. Results are checked chunk by chunk as the workers store them and
// not kept; a large job's checks, and its gradients made ahead of its
// senders, go on goroutines of their own where a second CPU can run them
// (they change no output). A harness/report Collector gets the arrivals and finishes,
// iteration and all-reduce times, switch memory occupancy sampled from the
// allocator, collisions, switch/PS-path chunks and retransmissions, and
// gives the [report.Results] Run returns. [Options] override the seed or
// policy, add pcaps and a progress bar, without editing the scenario.
//
// [Prepare] builds the same testbed and does not run it: a [Prepared] gives
// its nodes, its switch, the nodes linked to the switch ([Peer]) and each
// worker's exact check ([IterationCheck]). harness/up's processes each prepare the
// scenario and run their one node of it in real time, so they run the very
// nodes the emulator runs.
package run
