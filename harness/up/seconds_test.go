package up

import (
	"encoding/json"
	"testing"
	"time"
)

// TestSecondsRoundTrip: a duration written in seconds reads back to the
// nanosecond (below 1000 s), including ones whose float64 product falls
// just short of the integer (2.011544714 s).
func TestSecondsRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 2011544714, 1597529418, 999*time.Second + 999999999, 3 * time.Millisecond} {
		b, err := json.Marshal(Seconds(d))
		if err != nil {
			t.Fatal(err)
		}
		var s Seconds
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s.D() != d {
			t.Errorf("%v → %s → %v", d, b, s.D())
		}
	}
	// every nanosecond count in a window around the one above
	for d := time.Duration(2011544000); d < 2011546000; d++ {
		b, _ := json.Marshal(Seconds(d))
		var s Seconds
		if err := json.Unmarshal(b, &s); err != nil || s.D() != d {
			t.Fatalf("%v → %s → %v", d, b, s.D())
		}
	}
}
