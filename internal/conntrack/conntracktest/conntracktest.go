// Package conntracktest makes a Kubernetes-like ClusterIP without
// Kubernetes for the privileged tests of conntrack and of the probes that
// use it: a fresh network namespace where an iptables nat OUTPUT rule DNATs
// a service address to a backend server the test process listens on from
// inside the namespace. Only tests import it; it needs root, ip(8) and
// iptables(8).
package conntracktest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/netns"
)

// ServiceNetns is the namespace: connections to Service (10.96.0.10:80)
// made inside it reach Backend (127.0.0.1:<port>).
type ServiceNetns struct {
	Name    string
	Inode   uint32
	Service netip.AddrPort
	Backend netip.AddrPort
	fd      int
}

// NewServiceNetns makes the namespace (removed when t ends), its rule and
// its backend: serve runs on the backend's listener (nil: connections are
// accepted and held open until t ends). serve must return once the
// listener is closed.
func NewServiceNetns(t testing.TB, serve func(net.Listener)) *ServiceNetns {
	t.Helper()
	ns := &ServiceNetns{
		Name:    fmt.Sprintf("galago-ct-%d-%d", os.Getpid(), time.Now().UnixNano()%100000),
		Service: netip.MustParseAddrPort("10.96.0.10:80"),
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", ns.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns.Name).Run() })
	run("ip", "-n", ns.Name, "link", "set", "lo", "up")
	// The service address is local, so the client's source is too: the
	// DNAT to 127.0.0.1 then needs no route_localnet.
	run("ip", "-n", ns.Name, "addr", "add", ns.Service.Addr().String()+"/32", "dev", "lo")
	fd, err := unix.Open("/var/run/netns/"+ns.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	ns.fd = fd
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	ns.Inode = uint32(st.Ino)

	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ns.Backend = ln.Addr().(*net.TCPAddr).AddrPort()
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	if serve == nil {
		serve = holdConns
	}
	go func() {
		defer close(done)
		serve(ln)
	}()
	run("ip", "netns", "exec", ns.Name, "iptables", "-t", "nat", "-A", "OUTPUT",
		"-d", ns.Service.Addr().String()+"/32", "-p", "tcp", "--dport", fmt.Sprint(ns.Service.Port()),
		"-j", "DNAT", "--to-destination", ns.Backend.String())
	return ns
}

// holdConns accepts connections and closes them once the listener is.
func holdConns(ln net.Listener) {
	var held []net.Conn
	for {
		c, err := ln.Accept()
		if err != nil {
			for _, c := range held {
				c.Close()
			}
			return
		}
		held = append(held, c)
	}
}

// Do runs fn on a thread inside the namespace; sockets made there stay in
// it. The thread goes back to its namespace afterwards (a thread left in
// the namespace could be the main thread, which the runtime parks instead
// of ending: /proc/<pid>/ns/net would then name the test's namespace);
// if it cannot, it stays locked and ends with the goroutine.
func (ns *ServiceNetns) Do(fn func() error) error { return netns.DoFD(ns.fd, fn) }
