package faultctl

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes directions as a table, one line each: link, node,
// direction, state, configuration, impairments and windows in force,
// and counters.
func WriteTable(w io.Writer, st []DirState) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tNODE\tDIR\tSTATE\tRATE\tDELAY\tMTU\tIMPAIRMENTS\tWINDOWS\tSENT\tDELIVERED\tDROPS")
	for _, s := range st {
		state := "up"
		if !s.Up {
			state = "DOWN"
		}
		rate := "unlimited"
		if s.Config.RateGbps > 0 {
			rate = strconv.FormatFloat(s.Config.RateGbps, 'g', 6, 64) + " Gb/s"
		}
		mtu := s.Config.MTU
		if mtu == 0 {
			mtu = 1500
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%d\t%s\t%s\t%d\t%d\t%s\n", s.Link, s.Node, s.Dir, state, rate, s.Config.Delay, mtu,
			ImpairmentsString(s.Impairments), windowsString(s.Windows), s.Counters.SentPackets, s.Counters.DeliveredPackets, dropsString(s.Counters))
	}
	return tw.Flush()
}

// ImpairmentsString is im as key=value pairs (those set), or "-".
func ImpairmentsString(im Impairments) string {
	var kv []string
	f := func(k string, v float64) {
		if v != 0 {
			kv = append(kv, k+"="+strconv.FormatFloat(v, 'g', 6, 64))
		}
	}
	d := func(k string, v Duration) {
		if v != 0 {
			kv = append(kv, k+"="+time.Duration(v).String())
		}
	}
	f("loss", im.Loss)
	f("duplicate", im.Duplicate)
	f("reorder", im.Reorder)
	d("reorder_delay", im.ReorderDelay)
	f("corrupt", im.Corrupt)
	f("corrupt_undetected", im.CorruptUndetected)
	d("jitter", im.Jitter)
	if g := im.GilbertElliott; g != nil {
		kv = append(kv, fmt.Sprintf("gilbert_elliott=%g/%g/%g/%g", g.PGoodToBad, g.PBadToGood, g.LossGood, g.LossBad))
	}
	if len(kv) == 0 {
		return "-"
	}
	return strings.Join(kv, " ")
}

func windowsString(ws []WindowState) string {
	if len(ws) == 0 {
		return "-"
	}
	var out []string
	for _, w := range ws {
		v := strconv.FormatFloat(w.Value, 'g', 6, 64)
		if w.Kind == WinDelay || w.Kind == WinJitter {
			v = w.Delay.String()
		}
		out = append(out, fmt.Sprintf("%s %s (%v left)", w.Kind, v, time.Duration(w.Remaining).Round(time.Microsecond)))
	}
	return strings.Join(out, ", ")
}

func dropsString(c Counters) string {
	t := c.DropsTotal()
	if t == 0 {
		return "0"
	}
	var by []string
	d := c.Drops
	for _, x := range []struct {
		k string
		v uint64
	}{{"down", d.LinkDown}, {"mtu", d.MTU}, {"queue", d.Queue}, {"loss", d.Loss}, {"fcs", d.FCS}} {
		if x.v > 0 {
			by = append(by, fmt.Sprintf("%s %d", x.k, x.v))
		}
	}
	return fmt.Sprintf("%d (%s)", t, strings.Join(by, ", "))
}
