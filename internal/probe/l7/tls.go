package l7

import (
	"context"
	"time"

	"github.com/galago-project/galago/internal/syscap"
)

// tlsScanInterval is how often processes are looked at for TLS libraries.
const tlsScanInterval = 2 * time.Second

// tlsLoop attaches to the host's libraries, then scans processes every
// tlsScanInterval while support_ssl is on.
func (p *Probe) tlsLoop(ctx context.Context) error {
	p.mu.Lock()
	log := p.rt.Logger()
	a := syscap.NewTLSScanner(p.capture, p.root(), func(msg string, args ...any) { log.Info("l7: "+msg, args...) })
	p.mu.Unlock()
	t := time.NewTicker(tlsScanInterval)
	defer t.Stop()
	on := false
	for {
		p.mu.Lock()
		want := p.cfg.Params.SupportSSL == 1
		targets := p.cfg.Targets
		p.mu.Unlock()
		switch {
		case want && !on:
			a.AttachHost()
			on = true
		case !want && on:
			if err := p.capture.DetachTLS(); err != nil {
				return err
			}
			a.Forget()
			on = false
		}
		if on {
			a.Scan(func(pid int) bool { return targets == nil || targets.Observed(pid) })
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.tlsKick:
		}
	}
}

func (p *Probe) root() string {
	if p.hostPath == "" {
		return "/"
	}
	return p.hostPath
}
