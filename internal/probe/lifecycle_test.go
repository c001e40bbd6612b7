package probe

import (
	"errors"
	"sync"
	"testing"
)

// TestStopOnce: the teardown runs once, under the lock, and only the
// first call returns its error.
func TestStopOnce(t *testing.T) {
	var o StopOnce
	var mu sync.Mutex
	runs := 0
	teardown := func() error {
		if mu.TryLock() {
			t.Error("teardown ran without the lock")
		}
		runs++
		return errors.New("detach failed")
	}
	if err := o.Do(&mu, teardown); err == nil || err.Error() != "detach failed" {
		t.Fatalf("first Stop: %v", err)
	}
	if err := o.Do(&mu, teardown); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if runs != 1 {
		t.Fatalf("teardown ran %d times", runs)
	}
}
