package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/inabox/inabox/harness/scenario"
)

// rescaleOptions are the flags of `inabox rescale`.
type rescaleOptions struct {
	rateScale float64
}

func rescaleFlags(o *rescaleOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("rescale", flag.ContinueOnError)
	fs.Float64Var(&o.rateScale, "rate-scale", 0, "the rate scale to write the scenario at, in (0, 1]; 1 is true scale (required)")
	return fs
}

const rescaleDoc = "Writes the scenario at another rate scale to stdout, with what its results depend on kept: tensor_scale moves with " +
	"rate_scale, a stretched link delay is stretched anew (a true one kept), and the switch's memory and DynaINA's minimum pool keep their " +
	"size in windows. Its first line, a comment, says what was rescaled; stderr says what changed. E.g. the true-scale check of a scaled run: inabox rescale --rate-scale 1 FILE > true.yaml."

// cmdRescale runs `inabox rescale --rate-scale R FILE`.
func cmdRescale(o *rescaleOptions, args []string, stdout, stderr io.Writer) error {
	if o.rateScale == 0 {
		return usageError{msg: "rescale: --rate-scale is required"}
	}
	if len(args) != 1 {
		return usageError{msg: "rescale: give one scenario file"}
	}
	data, err := scenario.Source(args[0])
	if err != nil {
		return err
	}
	out, r, err := scenario.Rescale(args[0], data, o.rateScale)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: rate_scale %g → %g, a window %d → %d aggregators\n", args[0], r.RateScale, r.NewRateScale, r.Window, r.NewWindow)
	for _, c := range r.Changes {
		fmt.Fprintf(stderr, "  %s\n", c)
	}
	return nil
}
