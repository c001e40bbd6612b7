package probe

import (
	"context"
	"sync"
	"time"
)

// Every runs fn every period() until ctx is done. A value on kick (a
// Reconfigure) makes it read period() again and restart its ticker when
// the period changed. period is called with mu held (the probe's lock,
// which guards its configuration); fn without.
func Every(ctx context.Context, kick <-chan struct{}, mu sync.Locker, period func() time.Duration, fn func()) {
	locked := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return period()
	}
	cur := locked()
	t := time.NewTicker(cur)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			if d := locked(); d != cur {
				cur = d
				t.Reset(d)
			}
		case <-t.C:
			fn()
		}
	}
}

// Kick wakes the loop that reads ch (Every's kick) without blocking: one
// pending wake-up is enough, as the loop reads the configuration again
// when it takes it.
func Kick(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ReportPeriod is a probe's report period: override when set (tests),
// else the report_period parameter, else its default.
func ReportPeriod(override time.Duration, p Params) time.Duration {
	if override > 0 {
		return override
	}
	if d := p.Period(); d > 0 {
		return d
	}
	return DefaultParams().Period()
}
