package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inabox/inabox/harness/scenario"
)

// validateFlags are the flags of `inabox validate`, bound to print.
func validateFlags(print *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.BoolVar(print, "print", false, "print each valid scenario with its defaults filled in")
	return fs
}

// cmdValidate runs `inabox validate FILE...`.
func cmdValidate(printScenario *bool, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{msg: "validate: no scenario file given"}
	}
	models := scenario.DefaultModels()
	bad := 0
	for _, file := range args {
		s, err := scenario.Load(file)
		if err != nil {
			bad++
			var se *scenario.Error
			if errors.As(err, &se) {
				for _, fe := range se.Errs {
					fmt.Fprintln(stderr, fe)
				}
			} else {
				fmt.Fprintln(stderr, err)
			}
			continue
		}
		workers := 0
		for _, j := range s.Jobs {
			workers += j.Workers
		}
		est := s.Estimate(models)
		plural := "s"
		if len(s.Jobs) == 1 {
			plural = ""
		}
		ps := fmt.Sprintf("%d PS", s.Topology.PS.Count)
		if s.Topology.PS.Placement != scenario.PlacementDedicated {
			ps += " " + s.Topology.PS.Placement
		}
		held, limit := s.RunBytes(models, false)
		fmt.Fprintf(stdout, "%s: ok: %s, policy %s, %d job%s, %d workers on %d hosts, %s, %d slots; ~%.2f M worker packets, virtual time ≥ %v; holds ≤ %.2f GiB (at most %.2f GiB)\n",
			file, s.Name, s.Policy, len(s.Jobs), plural, workers, s.NumHosts(), ps, s.Topology.Switch.Slots,
			float64(est.WorkerPackets)/1e6, est.VirtualTime.Round(1e6), float64(held)/(1<<30), float64(limit)/(1<<30))
		for _, p := range s.Plan(models) {
			if len(p.Buckets) < 2 {
				continue
			}
			var sizes []string
			for i, b := range p.Buckets {
				if i == 6 && len(p.Buckets) > 8 {
					sizes = append(sizes, fmt.Sprintf("… %d more …", len(p.Buckets)-7))
					continue
				}
				if i > 6 && i < len(p.Buckets)-1 {
					continue
				}
				sizes = append(sizes, fmt.Sprintf("%.3g", float64(b.Elements)*4/(1<<20)))
			}
			fmt.Fprintf(stdout, "  job %s: %d buckets per iteration (MiB after tensor_scale, in the order they are ready: %s); forward %v, compute %v\n",
				p.Name, len(p.Buckets), strings.Join(sizes, " "), p.Forward.Round(time.Microsecond), p.Compute.Round(time.Microsecond))
		}
		for _, w := range s.Warnings(models) {
			fmt.Fprintf(stderr, "%s: warning: %s\n", file, w)
		}
		var se *scenario.Error
		if errors.As(s.CheckProcesses(models), &se) {
			for _, fe := range se.Errs { // inabox run takes it; inabox up does not
				w := *fe
				w.File, w.Line = "", 0
				at := file
				if fe.Line > 0 {
					at += ":" + strconv.Itoa(fe.Line)
				}
				fmt.Fprintf(stderr, "%s: warning%s\n", at, w.Error())
			}
		}
		if *printScenario {
			out, err := yaml.Marshal(s)
			if err != nil {
				return err
			}
			stdout.Write(out)
		}
	}
	if bad > 0 {
		return fmt.Errorf("validate: %d of %d scenario files invalid", bad, len(args))
	}
	return nil
}
