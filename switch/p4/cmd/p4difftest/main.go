// Command p4difftest runs STF vectors on BMv2 with a compiled P4 program
// (switch/p4/bmv2): the BMv2 half of `make p4-difftest`.
//
//	p4difftest -json ina.json [flags] VECTOR.stf...
//
// It prints PASS or FAIL per vector and exits 1 if any failed, 2 if one
// could not run (a tool missing, the switch not starting).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/inabox/inabox/switch/p4/bmv2"
)

func main() {
	jsonPath := flag.String("json", "", "the program compiled by p4c-bm2-ss (required)")
	sw := flag.String("switch", "", "simple_switch executable (default: on PATH)")
	cli := flag.String("cli", "", "simple_switch_CLI executable (default: on PATH)")
	keep := flag.Bool("keep", false, "keep every vector's working directory (always kept for a failure)")
	timeout := flag.Duration("timeout", 2*time.Minute, "time limit per vector")
	settle := flag.Duration("settle", 300*time.Millisecond, "how long BMv2's log must stay quiet before its packets count as processed (raise it on a loaded machine)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: p4difftest -json PROGRAM.json [flags] VECTOR.stf...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *jsonPath == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(*jsonPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "p4difftest:", err)
		os.Exit(2)
	}
	prog, err := bmv2.LoadProgram(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "p4difftest: %s: %v\n", *jsonPath, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r := &bmv2.Runner{Program: *jsonPath, Prog: prog, Switch: *sw, CLI: *cli, Keep: *keep, Timeout: *timeout, Settle: *settle}
	var passed, failed, broken int
	start := time.Now()
	for _, v := range flag.Args() {
		t0 := time.Now()
		res, err := r.Run(ctx, v)
		name := filepath.Base(v)
		var fe *bmv2.Failure
		switch {
		case err == nil:
			passed++
			fmt.Printf("PASS  %-44s %3d packets, %3d expected, %2d registers checked, BMv2 logged %d received (%.1f s)\n",
				name, res.Packets, res.Expects, res.Registers, res.Processed, time.Since(t0).Seconds())
		case errors.As(err, &fe):
			failed++
			fmt.Printf("FAIL  %-44s (%.1f s; kept %s)\n", name, time.Since(t0).Seconds(), res.WorkDir)
			for _, p := range fe.Problems {
				fmt.Printf("        %s\n", p)
			}
		default:
			broken++
			fmt.Printf("ERROR %-44s %v (kept %s)\n", name, err, res.WorkDir)
		}
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Printf("%d passed, %d failed, %d could not run, of %d vectors (%.0f s)\n",
		passed, failed, broken, flag.NArg(), time.Since(start).Seconds())
	switch {
	case broken > 0:
		os.Exit(2)
	case failed > 0:
		os.Exit(1)
	}
}
