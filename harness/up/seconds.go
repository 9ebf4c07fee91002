package up

import (
	"encoding/json"
	"math"
	"time"

	"github.com/inabox/inabox/harness/report"
)

// Seconds is a duration written to JSON in seconds (with a _s name), the
// unit of inabox run's results.json.
type Seconds time.Duration

// D is s as a time.Duration.
func (s Seconds) D() time.Duration { return time.Duration(s) }

func (s Seconds) String() string { return time.Duration(s).String() }

// Round is time.Duration's Round.
func (s Seconds) Round(m time.Duration) time.Duration { return time.Duration(s).Round(m) }

// MarshalJSON writes s in seconds, as results.json does (report.Num).
func (s Seconds) MarshalJSON() ([]byte, error) {
	return report.Num(time.Duration(s).Seconds()).MarshalJSON()
}

// UnmarshalJSON reads seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	// Rounded, not truncated: 2.011544714 s is 2011544713.9999998 ns
	// in float64, and a duration must survive the round trip through
	// MarshalJSON (to the nanosecond below 1000 s: 12 significant digits).
	*s = Seconds(math.Round(f * float64(time.Second)))
	return nil
}
