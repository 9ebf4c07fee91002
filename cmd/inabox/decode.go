package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// cmdDecode runs `inabox decode FILE.pcap`: each frame's RoCEv2 layers,
// ICRC verdict and INA header, then counts.
func cmdDecode(_ *struct{}, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return usageError{msg: fmt.Sprintf("decode: want exactly one pcap file (got %d)", len(args))}
	}
	f, err := os.Open(args[0])
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	defer f.Close()
	if _, err := rdma.DecodePcap(f, stdout, describeINA); err != nil {
		return fmt.Errorf("decode %s: %w", args[0], err)
	}
	return nil
}

// describeINA renders an INA header found in a RoCEv2 payload, or says why
// the payload is not one.
func describeINA(p []byte) string {
	if len(p) < inahdr.Len || p[0] != inahdr.Version {
		return fmt.Sprintf("payload %d B (no INA header)", len(p))
	}
	h := inahdr.Header(p)
	if err := h.Validate(); err != nil {
		return fmt.Sprintf("INA header malformed: %v", err)
	}
	var flags []string
	for _, f := range []struct {
		bit  uint8
		name string
	}{
		{inahdr.FlagCollision, "collision"}, {inahdr.FlagOverflow, "overflow"}, {inahdr.FlagResend, "resend"},
		{inahdr.FlagResult, "result"}, {inahdr.FlagFromPS, "from-ps"}, {inahdr.FlagPartial, "partial"}, {inahdr.FlagBypass, "bypass"},
	} {
		if h.Has(f.bit) {
			flags = append(flags, f.name)
		}
	}
	return fmt.Sprintf("INA job=%d allreduce=%d chunk=%d worker=%d bitmap=%#x count=%d exp=%d slot=%d flags=[%s]",
		h.Job(), h.AllReduce(), h.Chunk(), h.Worker(), h.Bitmap(), h.Count(), h.Exponent(), h.Slot(), strings.Join(flags, ","))
}
