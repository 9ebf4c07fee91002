package scenario

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/inabox/inabox/harness/testbed"
)

// Rescaled is what Rescale changed, field by field, for the user to see.
type Rescaled struct {
	// RateScale is the scale before and after; Window the window in
	// aggregators at each (testbed.PipeSlots).
	RateScale, NewRateScale float64
	Window, NewWindow       int
	// Changes are the fields written, as "path: old → new".
	Changes []string
}

// Rescale returns scenario file data (file names it in errors) run at
// another rate scale, rateScale in (0, 1], with what its results depend on
// kept: tensor_scale moves with rate_scale, so every transfer keeps its
// length; a link delay stretched by 1/rate_scale (longer than
// TrueDelayMax) is stretched by the new 1/rate_scale, a true one kept; and
// the switch's memory and DynaINA's minimum pool keep their size in
// windows: each is multiplied by the new window over the old, in
// aggregators, and rounded. ("Keep true delays and scale slot counts with
// the window": docs/results.md, "Scaling check", measures where that holds
// a true-scale result.) The file must have tensor_scale = rate_scale.
// Where anything changed, the output's first line is a comment saying
// what was rescaled (withRescaleNote), in place of an earlier rescale's.
func Rescale(file string, data []byte, rateScale float64) ([]byte, Rescaled, error) {
	var r Rescaled
	if !(rateScale > 0 && rateScale <= 1) {
		return nil, r, fmt.Errorf("rescale: rate scale %g: must be in (0, 1]", rateScale)
	}
	s, err := Parse(file, data, defaultModels)
	if err != nil {
		return nil, r, err
	}
	sc := s.Scaling
	if sc.TensorScale != sc.RateScale {
		return nil, r, fmt.Errorf("%s: scaling: tensor_scale %g, rate_scale %g: rescale needs them equal (a transfer of its true length)",
			file, sc.TensorScale, sc.RateScale)
	}
	t := s.Topology
	delay := t.LinkDelay.D()
	newDelay := delay
	if delay > TrueDelayMax && sc.RateScale < 1 {
		newDelay = time.Duration(math.Round(float64(delay) * sc.RateScale / rateScale))
	}
	lat := max(t.Switch.Latency.D(), 0)
	vpp := t.Switch.ValuesPerPacket
	gbps := t.LinkGbps * 1e9
	r.RateScale, r.NewRateScale = sc.RateScale, rateScale
	r.Window = testbed.PipeSlots(int64(math.Round(gbps*sc.RateScale)), delay, lat, vpp)
	r.NewWindow = testbed.PipeSlots(int64(math.Round(gbps*rateScale)), newDelay, lat, vpp)
	ratio := float64(r.NewWindow) / float64(r.Window)
	scaled := func(n int) int { return max(1, int(math.Round(float64(n)*ratio))) }

	type field struct {
		path, old, new string
	}
	fields := []field{
		{"scaling.tensor_scale", fmtScale(sc.TensorScale), fmtScale(rateScale)},
		{"scaling.rate_scale", fmtScale(sc.RateScale), fmtScale(rateScale)},
	}
	if newDelay != delay {
		fields = append(fields, field{"topology.link_delay", delay.String(), newDelay.String()})
	}
	fields = append(fields, field{"topology.switch.slots", strconv.Itoa(t.Switch.Slots), strconv.Itoa(scaled(t.Switch.Slots))})
	if m := s.DynaINA.MinSlots; m > 0 {
		fields = append(fields, field{"dynaina.min_slots", strconv.Itoa(m), strconv.Itoa(scaled(m))})
	}
	out := data
	for _, f := range fields {
		if f.old == f.new {
			continue
		}
		if out, err = Override(out, f.path, f.new); err != nil {
			return nil, r, fmt.Errorf("%s: %w", file, err)
		}
		r.Changes = append(r.Changes, fmt.Sprintf("%s: %s → %s", f.path, f.old, f.new))
	}
	if len(r.Changes) > 0 {
		out = withRescaleNote(out, r)
	}
	if _, err := Parse(file, out, defaultModels); err != nil {
		return nil, r, fmt.Errorf("%s rescaled to rate_scale %g: %w", file, rateScale, err)
	}
	return out, r, nil
}

// rescaleNote begins the first line of a rescaled file: what was rescaled,
// since the file's own comments still speak of the scale it was written
// for ("a window here is 6 aggregators").
const rescaleNote = "# inabox rescale: "

// withRescaleNote returns data with a first comment line saying what r
// changed, in place of the line an earlier rescale put there.
func withRescaleNote(data []byte, r Rescaled) []byte {
	if bytes.HasPrefix(data, []byte(rescaleNote)) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	note := fmt.Sprintf("%srate_scale %s → %s, a window of %d → %d aggregators (comments below may be of the old scale)\n",
		rescaleNote, fmtScale(r.RateScale), fmtScale(r.NewRateScale), r.Window, r.NewWindow)
	return append([]byte(note), data...)
}

func fmtScale(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
