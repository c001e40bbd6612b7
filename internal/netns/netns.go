// Package netns runs code inside another network namespace: sockets it
// opens (a TCP iterator, a netlink socket, a connection to a listener on
// a process's own loopback) belong to that namespace for their life.
package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread switched into the network namespace at path
// (e.g. /proc/<pid>/ns/net) and returns its error, or that of entering
// the namespace (fn did not run then). See DoFD.
func Do(path string, fn func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return DoFD(int(f.Fd()), fn)
}

// DoFD runs fn on an OS thread switched into the network namespace of
// the file descriptor fd and waits for it. The thread is locked for the
// switch and only returned to the scheduler once it is back in its own
// namespace (a thread left in the namespace could be the main thread,
// which the runtime parks instead of ending); if the way back fails the
// thread stays locked, so the Go runtime discards it with the goroutine,
// and that error is joined to fn's.
func DoFD(fd int, fn func() error) error {
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
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
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
