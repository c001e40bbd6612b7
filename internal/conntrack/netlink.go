package conntrack

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// nlTable is ctnetlink in one namespace.
type nlTable struct{ c *ct.Conn }

// dialNetlink opens a ctnetlink socket in the namespace of nsFD. socket(2) makes it in the calling thread's namespace, where
// it stays: the namespace is entered on a locked thread just for the call
// (see inNetns).
func dialNetlink(nsFD int) (table, error) {
	var c *ct.Conn
	err := inNetns(nsFD, func() (err error) {
		c, err = ct.Dial(&netlink.Config{})
		return err
	})
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, fmt.Errorf("%w: %w", errAbsent, err)
		}
		return nil, fmt.Errorf("ctnetlink: %w", err)
	}
	return &nlTable{c}, nil
}

func (t *nlTable) dnat(src, dst netip.AddrPort) (netip.AddrPort, error) {
	f := ct.NewFlow(unix.IPPROTO_TCP, 0, src.Addr(), dst.Addr(), src.Port(), dst.Port(), 0, 0)
	got, err := t.c.Get(f)
	switch {
	case errors.Is(err, unix.ENOENT):
		return netip.AddrPort{}, errNoEntry
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPROTONOSUPPORT):
		// nfnetlink without its ctnetlink subsystem.
		return netip.AddrPort{}, fmt.Errorf("%w: %w", errAbsent, err)
	case err != nil:
		return netip.AddrPort{}, fmt.Errorf("ctnetlink get: %w", err)
	}
	r := got.TupleReply
	b := netip.AddrPortFrom(r.IP.SourceAddress.Unmap(), r.Proto.SourcePort)
	if !b.Addr().IsValid() {
		return netip.AddrPort{}, fmt.Errorf("ctnetlink get: entry without a reply source")
	}
	return b, nil
}

func (t *nlTable) close() error { return t.c.Close() }

// inNetns runs fn on a locked thread moved into the namespace of nsFD. The
// thread goes back to the scheduler only once it is back in its own
// namespace; if the way back fails it stays locked, and the Go runtime
// ends it with the goroutine.
func inNetns(nsFD int, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("setns: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // the thread stays locked: discarded
		}
		runtime.UnlockOSThread()
		ch <- ferr
	}()
	return <-ch
}
