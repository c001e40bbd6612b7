package l7

import (
	"context"

	"github.com/galago-project/galago/internal/syscap"
)

// tlsLoop attaches to the host's libraries, then scans processes every
// syscap.TLSScanInterval while support_ssl is on.
func (p *Probe) tlsLoop(ctx context.Context) error {
	p.mu.Lock()
	log, capture := p.rt.Logger(), p.capture
	p.mu.Unlock()
	return syscap.RunTLS(ctx, capture, p.root(), func(msg string, args ...any) { log.Info("l7: "+msg, args...) }, p.tlsKick,
		func() (bool, func(int) bool) {
			p.mu.Lock()
			defer p.mu.Unlock()
			targets := p.cfg.Targets
			return p.cfg.Params.SupportSSL == 1, func(pid int) bool { return targets == nil || targets.Observed(pid) }
		})
}

func (p *Probe) root() string {
	if p.hostPath == "" {
		return "/"
	}
	return p.hostPath
}
