package conntrack

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/netns"
)

// nlTable is ctnetlink in one namespace.
type nlTable struct{ c *ct.Conn }

// dialNetlink opens a ctnetlink socket in the namespace of nsFD. socket(2) makes it in the calling thread's namespace, where
// it stays: the namespace is entered on a locked thread just for the call
// (see netns.DoFD).
func dialNetlink(nsFD int) (table, error) {
	var c *ct.Conn
	err := netns.DoFD(nsFD, func() (err error) {
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
