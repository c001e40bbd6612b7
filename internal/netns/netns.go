// Package netns runs code inside another process's network namespace:
// sockets it opens (a TCP iterator, a connection to a listener on the
// process's own loopback) belong to that namespace for their life.
package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread switched into the network namespace at path
// (e.g. /proc/<pid>/ns/net) and waits for it. The thread is locked for
// the switch and only returned to the scheduler once it is back in its
// own namespace; if the way back fails the thread stays locked, so the
// Go runtime discards it with the goroutine. The error is that of
// entering the namespace; fn did not run then.
func Do(path string, fn func()) error {
	target, err := os.Open(path)
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: this thread must not run other goroutines.
			errc <- nil
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	return <-errc
}
