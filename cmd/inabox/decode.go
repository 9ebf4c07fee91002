package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// decodeOpts are the flags of `inabox decode`.
type decodeOpts struct {
	job    uint16
	jobSet bool
}

// decodeFlags are the flags of `inabox decode`, bound to o.
func decodeFlags(o *decodeOpts) *flag.FlagSet {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.Func("job", "show only the frames whose INA header (data or control) is of job `N` (1..65535)", func(v string) error {
		n, err := strconv.ParseUint(v, 0, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("want a job ID 1..65535 (0 is reserved)")
		}
		o.job, o.jobSet = uint16(n), true
		return nil
	})
	return fs
}

// cmdDecode runs `inabox decode FILE.pcap`: each frame's RoCEv2 layers,
// ICRC verdict and INA header, then counts.
func cmdDecode(o *decodeOpts, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return usageError{msg: fmt.Sprintf("decode: want exactly one pcap file (got %d)", len(args))}
	}
	f, err := os.Open(args[0])
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	defer f.Close()
	opts := rdma.DecodeOptions{Payload: describeINA}
	if o.jobSet {
		opts.Filter = func(p []byte) bool {
			return len(p) >= inahdr.Len && p[0] == inahdr.Version && inahdr.Header(p).Job() == o.job
		}
	}
	if _, err := rdma.DecodePcapWith(f, stdout, opts); err != nil {
		return fmt.Errorf("decode %s: %w", args[0], err)
	}
	return nil
}

// inaFlags are the flag bits with the names decode prints, in bit order.
var inaFlags = []struct {
	bit  uint8
	name string
}{
	{inahdr.FlagCollision, "collision"}, {inahdr.FlagOverflow, "overflow"}, {inahdr.FlagResend, "resend"},
	{inahdr.FlagResult, "result"}, {inahdr.FlagFromPS, "from-ps"}, {inahdr.FlagPartial, "partial"}, {inahdr.FlagBypass, "bypass"},
	{inahdr.FlagCtl, "ctl"},
}

// describeINA renders an INA header found in a RoCEv2 payload: a data
// header with its fields, a control message by name with its fields (as
// inahdr.Ctl.String), the switch's absorbed marker, or why the payload is
// not one.
func describeINA(p []byte) string {
	if len(p) < inahdr.Len || p[0] != inahdr.Version {
		return fmt.Sprintf("payload %d B (no INA header)", len(p))
	}
	h := inahdr.Header(p)
	var flags []string
	for _, f := range inaFlags {
		if h.Has(f.bit) {
			flags = append(flags, f.name)
		}
	}
	switch {
	case h.IsCtl():
		c, err := inahdr.DecodeCtl(h)
		if err != nil {
			return fmt.Sprintf("INA control malformed: %v: %s", err, c)
		}
		return "INA " + c.String()
	case h.IsAbsorbed():
		return fmt.Sprintf("INA absorbed job=%d allreduce=%d chunk=%d worker=%d bitmap=%#x exp=%d slot=%d flags=[%s]",
			h.Job(), h.AllReduce(), h.Chunk(), h.Worker(), h.Bitmap(), h.Exponent(), h.Slot(), strings.Join(flags, ","))
	}
	if err := h.Validate(); err != nil {
		return fmt.Sprintf("INA header malformed: %v", err)
	}
	return fmt.Sprintf("INA job=%d allreduce=%d chunk=%d worker=%d bitmap=%#x count=%d exp=%d slot=%d flags=[%s]",
		h.Job(), h.AllReduce(), h.Chunk(), h.Worker(), h.Bitmap(), h.Count(), h.Exponent(), h.Slot(), strings.Join(flags, ","))
}
