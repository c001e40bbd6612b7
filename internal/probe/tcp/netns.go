package tcp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// openIterIn opens it with the calling thread inside the network namespace
// of process tgid: a TCP iterator walks the namespace of its opener. The
// thread is locked for the switch and only returned to the scheduler once
// it is back in its own namespace; if the way back fails the thread is
// left locked, so the Go runtime discards it with the goroutine.
func openIterIn(it *link.Iter, tgid uint32) (io.ReadCloser, error) {
	target, err := os.Open("/proc/" + strconv.FormatUint(uint64(tgid), 10) + "/ns/net")
	if err != nil {
		return nil, err
	}
	defer target.Close()
	type result struct {
		rc  io.ReadCloser
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns: %w", err)}
			return
		}
		rc, oerr := it.Open()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: this thread must not run other goroutines.
			ch <- result{rc, oerr}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{rc, oerr}
	}()
	r := <-ch
	return r.rc, r.err
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
