package bmv2

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWaitProcessedRecirculation: a recirculated pass is logged as another
// reception, so the wait needs every recirculated pass received again, not
// just as many receptions as packets sent.
func TestWaitProcessedRecirculation(t *testing.T) {
	log := filepath.Join(t.TempDir(), "switch.txt")
	const (
		rx    = "[0.0] Processing packet received on port 6\n"
		recir = "[0.0] Recirculating packet\n"
		rx1   = "[0.1] Processing packet received on port 6\n"
		rxB   = "[1.0] Processing packet received on port 7\n"
	)
	// Two packets sent; the first has recirculated once and its second pass
	// is logged, the second packet is not yet received: two receptions.
	if err := os.WriteFile(log, []byte(rx+recir+rx1), 0o644); err != nil {
		t.Fatal(err)
	}
	swDone := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if n, err := waitProcessed(ctx, log, 2, 20*time.Millisecond, swDone); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("returned %d, %v with the second packet not received", n, err)
	}
	// The second packet received and recirculated, its second pass not yet.
	if err := os.WriteFile(log, []byte(rx+recir+rx1+rxB+recir), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if n, err := waitProcessed(ctx2, log, 2, 20*time.Millisecond, swDone); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("returned %d, %v with a recirculated pass not received", n, err)
	}
	if err := os.WriteFile(log, []byte(rx+recir+rx1+rxB+recir+"[1.1] Processing packet received on port 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := waitProcessed(context.Background(), log, 2, 20*time.Millisecond, swDone)
	if err != nil || n != 4 {
		t.Fatalf("every pass received: %d, %v", n, err)
	}
}
