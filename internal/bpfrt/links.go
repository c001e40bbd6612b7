package bpfrt

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"
)

// CloseLinks detaches links in the reverse order of their attachment and
// returns the errors joined.
func CloseLinks(links []link.Link) error {
	var errs []error
	for i := len(links) - 1; i >= 0; i-- {
		errs = append(errs, links[i].Close())
	}
	return errors.Join(errs...)
}

// Links are the attached programs of a probe whose hooks follow its
// sub-items, by program name.
type Links map[string]link.Link

// Set attaches program name with attach when want and it is not attached,
// and detaches it when not want and it is; otherwise it does nothing.
// detached reports a link closed. The errors name the program ("attach
// name: ...", "detach name: ..."); a link that fails to close stays in ls.
func (ls Links) Set(name string, want bool, attach func() (link.Link, error)) (detached bool, err error) {
	l, have := ls[name]
	switch {
	case want && !have:
		l, err := attach()
		if err != nil {
			return false, fmt.Errorf("attach %s: %w", name, err)
		}
		ls[name] = l
	case !want && have:
		if err := l.Close(); err != nil {
			return false, fmt.Errorf("detach %s: %w", name, err)
		}
		delete(ls, name)
		return true, nil
	}
	return false, nil
}

// Close detaches every link and empties ls.
func (ls Links) Close() error {
	var errs []error
	for name, l := range ls {
		errs = append(errs, l.Close())
		delete(ls, name)
	}
	return errors.Join(errs...)
}
