package tcp

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cookieOf is the kernel's socket cookie of c (SO_COOKIE), the key of the
// owner map.
func cookieOf(t *testing.T, c syscall.Conn) uint64 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var cookie uint64
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		cookie, gerr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return cookie
}

// TestPrivilegedOwnersForgotten: owners live in a hash keyed by socket
// cookie (sockowner.h). Every socket of this process gets exactly its
// owner (this process, its role) while it lives, and each entry is gone
// once the kernel has destroyed the socket: nothing leaks per connection.
func TestPrivilegedOwnersForgotten(t *testing.T) {
	requirePrivileged(t)
	p, _ := startProbe(t, defaultCfg())
	// Plain TCP: Go listens with MPTCP by default, whose SO_COOKIE names
	// the MPTCP socket, not the TCP subflow the owner belongs to.
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const conns = 5
	want := map[uint64]uint8{cookieOf(t, ln.(*net.TCPListener)): 3} // listener
	var all []net.Conn
	for range conns {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		want[cookieOf(t, c.(*net.TCPConn))] = 1 // client
		want[cookieOf(t, s.(*net.TCPConn))] = 2 // server
		all = append(all, c, s)
	}
	owners := p.objs.GalagoSkOwners
	for cookie, role := range want {
		var o tcpGalagoSkOwner
		if err := owners.Lookup(cookie, &o); err != nil {
			t.Fatalf("socket %d (role %d): no owner: %v", cookie, role, err)
		}
		if o.Tgid != uint32(os.Getpid()) || o.Role != role {
			t.Errorf("socket %d: owner tgid %d role %d, want %d role %d", cookie, o.Tgid, o.Role, os.Getpid(), role)
		}
	}
	for _, c := range all {
		c.Close()
	}
	ln.Close()
	// The active closers' full sockets are destroyed when they enter
	// TIME_WAIT, the passive closers' at the final ACK: within
	// milliseconds on loopback.
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := 0
		for cookie := range want {
			var o tcpGalagoSkOwner
			if owners.Lookup(cookie, &o) == nil {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d owners left after their sockets were closed", left, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
