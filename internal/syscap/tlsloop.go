package syscap

import (
	"context"
	"time"
)

// TLSScanInterval is how often RunTLS looks at processes for TLS
// libraries and Go executables.
const TLSScanInterval = 2 * time.Second

// TLSAttacher is a consumer of the capture that attaches and detaches the
// TLS uprobes (a Sub).
type TLSAttacher interface {
	TLSTarget
	DetachTLS() error
}

// RunTLS keeps a's TLS uprobes as want says, until ctx is done: while on,
// the host's libraries once, then the observed processes' libraries and
// executables every TLSScanInterval (or at a kick); when it turns off,
// every uprobe is detached. root is the host's / (GOPHER_HOST_PATH).
func RunTLS(ctx context.Context, a TLSAttacher, root string, log func(msg string, args ...any), kick <-chan struct{},
	want func() (on bool, observed func(pid int) bool)) error {
	s := NewTLSScanner(a, root, log)
	t := time.NewTicker(TLSScanInterval)
	defer t.Stop()
	attached := false
	for {
		on, observed := want()
		switch {
		case on && !attached:
			s.AttachHost()
			attached = true
		case !on && attached:
			if err := a.DetachTLS(); err != nil {
				return err
			}
			s.Forget()
			attached = false
		}
		if attached {
			s.Scan(observed)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-kick:
		}
	}
}
