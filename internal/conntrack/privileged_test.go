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

	"github.com/galago-project/galago/internal/conntrack/conntracktest"
	"github.com/galago-project/galago/internal/probe/probetest"
)

func TestLookupDNATPrivileged(t *testing.T) {
	probetest.RequireTools(t, "ip", "iptables", "sleep")
	ns := conntracktest.NewServiceNetns(t, nil)

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
	// Conntrack is per namespace: the test's own has no such entry (the
	// namespace of this thread: /proc/self/ns/net is the main thread's,
	// which another test of the binary may have moved).
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

	// A client gone by the time of its lookup: the namespace is found
	// through another process in it (the holder).
	gone := exec.Command("ip", "netns", "exec", ns.Name, "true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	r4 := New(Options{})
	defer r4.Close()
	if got := r4.Backend(tuple(svcConn, gone.Process.Pid)); got != ns.Backend {
		t.Fatalf("Backend for an exited client = %v, want %v", got, ns.Backend)
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

// BenchmarkLookupPrivileged: the cost of one uncached lookup (a ctnetlink
// GET on the namespace's open socket) and of a cached answer.
func BenchmarkLookupPrivileged(b *testing.B) {
	probetest.RequireTools(b, "ip", "iptables")
	ns := conntracktest.NewServiceNetns(b, nil)
	var c net.Conn
	if err := ns.Do(func() (err error) {
		c, err = net.Dial("tcp", ns.Service.String())
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	tp := Tuple{
		Netns: ns.Inode, PID: uint32(os.Getpid()),
		Src: c.LocalAddr().(*net.TCPAddr).AddrPort(), Dst: c.RemoteAddr().(*net.TCPAddr).AddrPort(),
	}
	b.Run("uncached", func(b *testing.B) {
		r := New(Options{TTL: time.Nanosecond})
		defer r.Close()
		// The namespace's socket is opened through a thread in it.
		if err := ns.Do(func() error {
			if got := r.Backend(tp); got != ns.Backend {
				return fmt.Errorf("Backend = %v, want %v", got, ns.Backend)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			r.Backend(tp)
		}
		b.StopTimer()
		if st := r.Stats(); st.NATed != uint64(b.N)+1 || st.Hits != 0 {
			b.Fatalf("stats %+v after %d lookups", st, b.N+1)
		}
	})
	b.Run("cached", func(b *testing.B) {
		r := New(Options{})
		defer r.Close()
		if err := ns.Do(func() error {
			r.Backend(tp)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			r.Backend(tp)
		}
	})
}
