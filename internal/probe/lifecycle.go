package probe

import "sync"

// StopOnce makes a probe's Stop idempotent: the first Do runs the
// teardown with the probe's lock held and returns its error; later calls
// return nil and run nothing.
type StopOnce struct{ once sync.Once }

// Do runs teardown once, holding mu.
func (o *StopOnce) Do(mu sync.Locker, teardown func() error) error {
	mu.Lock()
	defer mu.Unlock()
	var err error
	o.once.Do(func() { err = teardown() })
	return err
}

// LogError counts a non-fatal error of the probe and logs it on the
// probe's logger: msg, then attrs, then err.
func LogError(rt Runtime, msg string, err error, attrs ...any) {
	rt.Error()
	rt.Logger().Warn(msg, append(attrs, "err", err)...)
}
