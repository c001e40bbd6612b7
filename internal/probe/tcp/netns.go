package tcp

import (
	"errors"
	"io"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/netns"
)

// openIterIn opens it with the calling thread inside the network namespace
// of process tgid: a TCP iterator walks the namespace of its opener.
func openIterIn(it *link.Iter, tgid uint32) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := netns.Do("/proc/"+strconv.FormatUint(uint64(tgid), 10)+"/ns/net", func() (err error) {
		rc, err = it.Open()
		return err
	})
	if err != nil {
		if rc != nil {
			rc.Close()
		}
		return nil, err
	}
	return rc, nil
}

// netnsOwn is the inode of the probe's own network namespace.
func netnsOwn() (uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return 0, err
	}
	return uint32(st.Ino), nil
}

// takeNetns reads and clears the namespaces the owner walk found.
func takeNetns(m *ebpf.Map) (map[uint32]uint32, error) {
	out := map[uint32]uint32{}
	var ns, tgid uint32
	it := m.Iterate()
	for it.Next(&ns, &tgid) {
		out[ns] = tgid
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	for ns := range out {
		if err := m.Delete(ns); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, err
		}
	}
	return out, nil
}
