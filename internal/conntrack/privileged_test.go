package conntrack

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe/probetest"
)

// ServiceNetns is a network namespace with a Kubernetes-like ClusterIP:
// Service (10.96.0.10:80) is DNAT'd by an iptables nat OUTPUT rule to a
// TCP server on Backend (127.0.0.1) that the test process listens on from
// inside the namespace. Exported to the probes' tests through
// NewServiceNetns.
type ServiceNetns struct {
	Name    string
	Inode   uint32
	Service netip.AddrPort
	Backend netip.AddrPort
	fd      int
}

func TestLookupDNATPrivileged(t *testing.T) {
	probetest.RequireTools(t, "ip", "iptables", "sleep")
	ns := newServiceNetns(t)

	// A process living in the namespace, as a pod's would: the resolver
	// enters the namespace through its /proc/<pid>/ns/net.
	holder := exec.Command("ip", "netns", "exec", ns.Name, "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	probetest.WaitFor(t, "the holder process in the namespace", func() bool {
		ino, err := nsInode(fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid))
		return err == nil && ino == ns.Inode
	})

	var svcConn, directConn net.Conn
	if err := ns.Do(func() (err error) {
		if svcConn, err = net.Dial("tcp", ns.Service.String()); err != nil {
			return err
		}
		directConn, err = net.Dial("tcp", ns.Backend.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer svcConn.Close()
	defer directConn.Close()
	tuple := func(c net.Conn, pid int) Tuple {
		return Tuple{
			Netns: ns.Inode, PID: uint32(pid),
			Src: c.LocalAddr().(*net.TCPAddr).AddrPort(), Dst: c.RemoteAddr().(*net.TCPAddr).AddrPort(),
		}
	}
	if got := unmap(tuple(svcConn, 0).Dst); got != ns.Service {
		t.Fatalf("the client socket's remote is %v, want the service %v", got, ns.Service)
	}

	errs := 0
	logRT := probetest.NewRuntime(t)
	r := New(Options{Log: logRT.Logger(), OnError: func() { errs++ }})
	defer func() {
		if t.Failed() {
			t.Log(logRT.Logs(), r.Stats())
		}
	}()
	defer r.Close()
	if got := r.Backend(tuple(svcConn, holder.Process.Pid)); got != ns.Backend {
		t.Fatalf("Backend(service connection) = %v, want the DNAT backend %v", got, ns.Backend)
	}
	// A connection to the backend itself has an entry without NAT.
	if got := r.Backend(tuple(directConn, holder.Process.Pid)); got != ns.Backend {
		t.Fatalf("Backend(direct connection) = %v, want %v", got, ns.Backend)
	}
	// A tuple conntrack never saw: not NATed.
	none := tuple(svcConn, holder.Process.Pid)
	none.Src = netip.AddrPortFrom(none.Src.Addr(), 1)
	if got := r.Backend(none); got != ns.Service {
		t.Fatalf("Backend(unknown tuple) = %v, want the service address kept", got)
	}
	// Conntrack is per namespace: the test's own has no such entry. (Not
	// r.selfNS: a thread that ran ns.Do may have been the main thread, which
	// the runtime parks instead of ending, and /proc/self/ns/net follows it.)
	host := tuple(svcConn, os.Getpid())
	runtime.LockOSThread()
	hostNS, err := nsInode("/proc/thread-self/ns/net")
	runtime.UnlockOSThread()
	if err != nil || hostNS == ns.Inode {
		t.Fatalf("the test's namespace: %d, %v", hostNS, err)
	}
	host.Netns = hostNS
	if got := r.Backend(host); got != ns.Service {
		t.Fatalf("Backend in the host namespace = %v, want the service address (no entry there)", got)
	}
	st := r.Stats()
	if st.Lookups != 4 || st.NATed != 1 || st.NoEntry != 2 || st.Failures != 0 || errs != 0 {
		t.Fatalf("stats %+v, errors %d", st, errs)
	}

	// A process whose namespace is another thread's: found through
	// /proc/<pid>/task. The lookup runs while this thread is still in it.
	r2 := New(Options{})
	defer r2.Close()
	if err := ns.Do(func() error {
		if got := r2.Backend(tuple(svcConn, os.Getpid())); got != ns.Backend {
			return fmt.Errorf("Backend through a thread = %v, want %v", got, ns.Backend)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// newServiceNetns makes the namespace, its rule and its backend server
// (which accepts and holds connections until the test ends).
func newServiceNetns(t *testing.T) *ServiceNetns {
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
	t.Cleanup(func() { ln.Close() })
	ns.Backend = ln.Addr().(*net.TCPAddr).AddrPort()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	run("ip", "netns", "exec", ns.Name, "iptables", "-t", "nat", "-A", "OUTPUT",
		"-d", ns.Service.Addr().String()+"/32", "-p", "tcp", "--dport", fmt.Sprint(ns.Service.Port()),
		"-j", "DNAT", "--to-destination", ns.Backend.String())
	return ns
}

// Do runs fn on a thread inside the namespace; sockets made there stay in
// it. The thread is discarded afterwards (never unlocked).
func (ns *ServiceNetns) Do(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- fn()
	}()
	return <-ch
}
