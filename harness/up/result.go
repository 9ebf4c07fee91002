package up

import (
	"fmt"
	"strings"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/up/faultctl"
	"github.com/inabox/inabox/internal/procnode"
)

// defaultLateTolerance is Config.LateTolerance's default (and the
// switch's, building the result of a run over the barrier).
const defaultLateTolerance = time.Millisecond

// reports are a run's processes' final reports: what a Result is built
// from, by the orchestrator (the --report files) and by the switch at the
// barrier's end (the reports the peers sent it).
type reports struct {
	Switch SwitchReport
	// Peers has every PS's and worker's report by node; a missing one
	// (its process never reported) makes the worker inexact.
	Peers map[string]PeerReport
	// Pid gives a process's pid (0 if unknown: another machine's).
	Pid func(node string) int
	// Tolerance is Config.LateTolerance.
	Tolerance time.Duration
}

func (rp reports) procResult(name string, rep procnode.Report) ProcResult {
	pid := 0
	if rp.Pid != nil {
		pid = rp.Pid(name)
	}
	return ProcResult{Name: name, Pid: pid, Elapsed: Seconds(rep.Elapsed), MaxLate: Seconds(rep.Realtime.MaxLate),
		Late: rep.Realtime.Late, Events: rep.Realtime.Events, KeptUp: rep.Realtime.MaxLate <= rp.Tolerance}
}

// buildResult fills res from the reports: the switch's and PSs' process
// results and reports, every worker's all-reduces (checked in its process
// against the reference sum) and the jobs' completion times, the links'
// counters, the workers' start skew, and whether every process kept up
// with real time (with a warning for each that did not; faulted says
// whether a fault paused or restarted a node's process).
func buildResult(prep *run.Prepared, rp reports, faulted func(string) bool, res *Result) {
	peers, _ := prep.Peers() // checked by the caller
	res.SwitchReport = rp.Switch
	res.Switch = rp.procResult(switchProc, rp.Switch.Report)
	ups := map[string]emu.LinkStats{}
	for _, pe := range peers {
		if c := pe.CoLocated; c != nil {
			// Its host's process runs it and reports its counters.
			hr := rp.Peers[pe.Node]
			res.PSReports = append(res.PSReports, PeerReport{Report: hr.Report, Node: c.PS, Role: "ps", StartUnixNano: hr.StartUnixNano, PS: hr.PS, Error: hr.Error})
			pr := rp.procResult(pe.Node, hr.Report)
			pr.Name, pr.In = c.PS, pe.Node
			res.PSs = append(res.PSs, pr)
			continue
		}
		if pe.Role != "ps" {
			continue
		}
		pr := rp.Peers[pe.Node]
		res.PSReports = append(res.PSReports, pr)
		res.PSs = append(res.PSs, rp.procResult(pe.Node, pr.Report))
		if len(pr.Ports) > 0 {
			ups[pe.Node] = pr.Ports[0].ToBackend
		}
	}
	plans := prep.Plans()
	jobs := make([]JobResult, len(plans))
	for j, pl := range plans {
		jobs[j] = JobResult{Name: pl.Name, Workers: pl.Workers, Iterations: pl.Iterations, Exact: true}
	}
	var firstStart, lastStart int64
	first := true
	for _, pe := range peers {
		if pe.Role != "worker" {
			continue
		}
		n := pe.Node
		hr := rp.Peers[n]
		if len(hr.Ports) > 0 {
			ups[n] = hr.Ports[0].ToBackend
		}
		pl := plans[pe.Job]
		wr := WorkerResult{ProcResult: rp.procResult(n, hr.Report), Job: pl.Name, Rank: pe.Rank, Iterations: hr.Iterations}
		wr.Exact = hr.Done && len(hr.Iterations) == pl.AllReduces()
		var busy time.Duration
		var elems int64
		for _, it := range hr.Iterations {
			wr.Exact = wr.Exact && it.Exact
			busy += it.End - it.Start
			elems += it.Elements
		}
		if n := len(hr.Iterations); n > 0 {
			jobs[pe.Job].JCT = max(jobs[pe.Job].JCT, Seconds(hr.Iterations[n-1].End-pl.Arrival))
		}
		if busy > 0 {
			wr.Gbps = float64(4*elems) * 8 / busy.Seconds() / 1e9
		}
		jobs[pe.Job].Exact = jobs[pe.Job].Exact && wr.Exact
		if first || hr.StartUnixNano < firstStart {
			firstStart = hr.StartUnixNano
		}
		first = false
		lastStart = max(lastStart, hr.StartUnixNano)
		res.Workers = append(res.Workers, wr)
	}
	res.Jobs = jobs
	for _, pe := range peers {
		res.Links = append(res.Links, LinkResult{Link: pe.Host, Node: pe.Node, Dir: faultctl.Up, Stats: ups[pe.Node]})
		for _, pr := range res.SwitchReport.Ports {
			if pr.Port == pe.SwitchPort {
				res.Links = append(res.Links, LinkResult{Link: pe.Host, Node: pe.Node, Dir: faultctl.Down, Stats: pr.ToBackend})
			}
		}
	}
	res.StartSkew = Seconds(lastStart - firstStart)
	rateFractions(peers, res)
	res.KeptUp = true
	for _, pr := range append(append([]ProcResult{res.Switch}, res.PSs...), workerProcs(res.Workers)...) {
		if !pr.KeptUp && pr.In == "" { // a process, named once
			res.KeptUp = false
			msg := fmt.Sprintf("%s did not keep up with real time: events ran up to %v late (%d events late); the links' rates and delays did not hold then",
				pr.Name, pr.MaxLate, pr.Late)
			if faulted != nil && faulted(pr.Name) {
				msg += " (a fault paused or restarted it: a pause makes its events late by as long)"
			}
			res.Warnings = append(res.Warnings, msg)
		}
	}
}

// checkExact returns an error naming the first worker that does not hold
// the reference sum.
func (res *Result) checkExact(prep *run.Prepared) error {
	plans := prep.Plans()
	byName := map[string]int{}
	for j, pl := range plans {
		byName[pl.Name] = j
	}
	for _, wr := range res.Workers {
		if !wr.Exact {
			var bad []string
			for _, it := range wr.Iterations {
				if !it.Exact {
					bad = append(bad, fmt.Sprintf("iteration %d: %d of %d values differ", it.Iteration, it.Mismatches, it.Elements))
				}
			}
			if len(wr.Iterations) < plans[byName[wr.Job]].AllReduces() && len(bad) == 0 {
				bad = append(bad, fmt.Sprintf("%d all-reduces finished", len(wr.Iterations)))
			}
			return fmt.Errorf("up: %s (job %s rank %d) does not hold the reference sum: %s", wr.Name, wr.Job, wr.Rank, strings.Join(bad, "; "))
		}
	}
	return nil
}
