package report

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// FormatSeconds writes seconds with a fitting unit (ns, µs, ms, s); "–"
// for an undefined value.
func FormatSeconds(s Num) string {
	f := float64(s)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "–"
	}
	d := time.Duration(math.Round(f * 1e9))
	switch a := math.Abs(f); {
	case a == 0:
		return "0 s"
	case a < 1e-6:
		return strconv.FormatInt(int64(d), 10) + " ns"
	case a < 1e-3:
		return fmt.Sprintf("%.3g µs", f*1e6)
	case a < 1:
		return fmt.Sprintf("%.4g ms", f*1e3)
	}
	return fmt.Sprintf("%.4g s", f)
}

// FormatSI writes v with an SI prefix and unit, e.g. "1.23 Gelements/s",
// or "1.23G" without a unit.
func FormatSI(v Num, unit string) string {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "–"
	}
	sp := " "
	if unit == "" {
		sp = ""
	}
	for _, u := range []struct {
		p string
		d float64
	}{{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if math.Abs(f) >= u.d {
			return fmt.Sprintf("%.3g%s%s%s", f/u.d, sp, u.p, unit)
		}
	}
	return fmt.Sprintf("%.3g%s%s", f, sp, unit)
}

// FormatPercent writes a fraction as a percentage.
func FormatPercent(v Num) string {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", f*100)
}

func csvNum(n Num) string {
	b, _ := n.MarshalJSON()
	if string(b) == "null" {
		return ""
	}
	return string(b)
}

func itoa(i int) string  { return strconv.Itoa(i) }
func i64(i int64) string { return strconv.FormatInt(i, 10) }
