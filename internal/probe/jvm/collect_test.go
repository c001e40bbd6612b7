package jvm

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/jmx"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// fakeJVM writes a /proc tree under root with process pid (nspid inside
// its namespace) whose hsperfdata is the fixture, with the attach
// capability as given, catching SIGQUIT or not.
func fakeJVM(t *testing.T, root string, pid, nspid int, attachCapable, catchesQuit bool) {
	t.Helper()
	proc := filepath.Join(root, "proc", fmt.Sprint(pid))
	perf := filepath.Join(proc, "root", "tmp", "hsperfdata_app")
	if err := os.MkdirAll(perf, 0o755); err != nil {
		t.Fatal(err)
	}
	b := []byte(readFixture(t, "hsperfdata-g1-jdk17"))
	if !attachCapable {
		i := bytes.Index(b, []byte("1100000000"))
		if i < 0 {
			t.Fatal("no jvmCapabilities in the fixture")
		}
		b[i] = '0'
	}
	sigcgt := "0000000000000000"
	if catchesQuit {
		sigcgt = "0000000000000004"
	}
	stat := fmt.Sprintf("%d (java) S 1 1 1 0 -1 0 0 0 0 0 250 50 0 0 20 0 30 0 12345 0 0", pid) + strings.Repeat(" 0", 30) + "\n"
	status := fmt.Sprintf("Name:\tjava\nTgid:\t%d\nPid:\t%d\nPPid:\t1\nNStgid:\t%d\t%d\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nSigCgt:\t%s\n", pid, pid, pid, nspid, sigcgt)
	for name, data := range map[string][]byte{
		filepath.Join(perf, fmt.Sprint(nspid)): b,
		filepath.Join(proc, "stat"):            []byte(stat),
		filepath.Join(proc, "status"):          []byte(status),
	} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollectWithoutAttach: JVMs in containers (nspid 1) that cannot be
// attached to without harm, one with attach disabled and one not
// catching SIGQUIT (-Xrs), are never signalled (their pids do not exist:
// a signal would fail and be counted) and get the hsperfdata tables; a
// process without hsperfdata gets none.
func TestCollectWithoutAttach(t *testing.T) {
	root := t.TempDir()
	const disabled, xrs = 4000001, 4000002
	fakeJVM(t, root, disabled, 1, false, true)
	fakeJVM(t, root, xrs, 1, true, false)
	if err := os.MkdirAll(filepath.Join(root, "proc", "4000003"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := New(procfs.FS{Root: root}, withInterval(time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	recs := rt.WaitRecords(t, "both JVMs' heaps", func(recs []*table.Record) bool {
		n := 0
		for _, r := range recs {
			if r.Table == table.JvmMem && r.Str("area") == "heap" {
				n++
			}
		}
		return n == 2
	})
	p.loop.Collect(time.Now()) // a second period: still no attach
	for _, r := range recs {
		if r.Table == table.JvmMem && r.Str("area") == "heap" {
			// the fixture's old gen, 66714.0 KiB as jstat read it (eden
			// was empty when the file was copied)
			if got := r.Values[table.JvmMem.MustIndex("mem_bytes_used")].Num; got < 66714<<10 || got >= 66715<<10 {
				t.Errorf("pid %s heap used %v", r.Str("tgid"), got)
			}
		}
		if r.Table == table.JvmThread && r.Values[table.JvmThread.MustIndex("threads_deadlocked")].Set {
			t.Errorf("pid %s: threads_deadlocked without attach", r.Str("tgid"))
		}
		if r.Table == table.JvmProc && r.Values[table.JvmProc.MustIndex("proc_cpu_secs_total")].Num != 3 {
			t.Errorf("cpu %v, want (250+50)/100", r.Values[table.JvmProc.MustIndex("proc_cpu_secs_total")].Num)
		}
	}
	if n := rt.ErrorCount(); n != 0 {
		t.Errorf("%d errors (a signal tried?): %s", n, rt.Logs())
	}
	warned := 0
	for _, l := range rt.LogEntries() {
		if strings.HasPrefix(l.Msg, "jvm: attach unavailable") {
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("%d attach-unavailable lines, want one per JVM:\n%s", warned, rt.Logs())
	}
}

// TestHungJMX: a JVM whose JMX connector stops answering (here after
// newClient) costs the period one read timeout and one close timeout: the
// other tables are still reported, the error counted, the connection
// dropped to be dialled again next period.
func TestHungJMX(t *testing.T) {
	root := t.TempDir()
	const pid = 4000001
	fakeJVM(t, root, pid, 1, false, true)
	p := New(procfs.FS{Root: root}, withInterval(time.Hour))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	if err := p.Start(rt.Context(), probe.Config{Params: probe.DefaultParams()}, rt); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(t, p)
	startCollected(t, rt, p)
	errs := rt.ErrorCount()

	url, err := os.ReadFile("../../jmx/testdata/service-url-jdk17.txt")
	if err != nil {
		t.Fatal(err)
	}
	dial := hangingConnector(t, strings.TrimSpace(string(url)))
	const timeout = 200 * time.Millisecond
	cl, err := jmx.Dial(context.Background(), strings.TrimSpace(string(url)), dial, timeout)
	if err != nil {
		t.Fatal(err)
	}
	j := p.jvms[pid]
	j.jmx.client, j.jmx.off = cl, false

	start := time.Now()
	p.loop.Collect(time.Now())
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the period took %v with a hung connector", d)
	}
	recs, _ := rt.Take()
	tables := map[string]bool{}
	for _, r := range recs {
		tables[r.Table.Name] = true
	}
	for _, tb := range []*table.Table{table.JvmInfo, table.JvmThread, table.JvmMem, table.JvmMemPool, table.JvmGc} {
		if !tables[tb.Name] {
			t.Errorf("no %s with a hung connector", tb.Name)
		}
	}
	if tables[table.JvmBufPool.Name] {
		t.Error("jvm_buf_pool reported without an answer")
	}
	if n := rt.ErrorCount() - errs; n != 1 {
		t.Errorf("%d errors counted, want 1", n)
	}
	if j.jmx.client != nil {
		t.Error("the hung connection is kept")
	}
}

// startCollected waits for the start's collection to end and drops its
// records: it publishes them one at a time, so that a Take on its first
// would leave the rest to the test's own collection.
func startCollected(t *testing.T, rt *probetest.Runtime, p *Probe) {
	t.Helper()
	rt.WaitTable(t, table.JvmMem, 1, nil)
	p.loop.Idle()
	rt.Take()
}

// hangingConnector is a JMX connector that answers the JRMP handshake and
// newClient (with the stub of url: a UnicastRef on the same port), then
// reads calls and never answers.
func hangingConnector(t *testing.T, url string) jmx.DialFunc {
	t.Helper()
	_, b64, _ := strings.Cut(url, "/stub/")
	stub, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		hello := make([]byte, 7)
		if _, err := io.ReadFull(c, hello); err != nil {
			return
		}
		// ProtocolAck, the client's endpoint ("a":0), read its own back.
		_, _ = c.Write([]byte{0x4e, 0, 1, 'a', 0, 0, 0, 0})
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		// ReturnData: normal return, a UID, the stub (without the
		// stream header of its own).
		reply := append([]byte{0x51, 0xac, 0xed, 0, 5, 0x77, 15, 1}, make([]byte, 14)...)
		_, _ = c.Write(append(reply, stub[4:]...))
		_, _ = io.Copy(io.Discard, c)
	}()
	var d net.Dialer
	return func(ctx context.Context, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	}
}
