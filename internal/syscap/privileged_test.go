package syscap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
)

// recorder is a Handler that keeps everything.
type recorder struct {
	mu     sync.Mutex
	conns  map[uint64]Conn
	data   map[uint64][]l7.Chunk
	closed map[uint64]bool
}

func newRecorder() *recorder {
	return &recorder{conns: map[uint64]Conn{}, data: map[uint64][]l7.Chunk{}, closed: map[uint64]bool{}}
}

func (r *recorder) Conn(c *Conn) { r.mu.Lock(); r.conns[c.ID] = *c; r.mu.Unlock() }
func (r *recorder) Data(d *Data) {
	r.mu.Lock()
	r.data[d.ConnID] = append(r.data[d.ConnID], l7.Chunk{Dir: d.Dir, TS: d.TS, Data: bytes.Clone(d.Bytes), Size: d.Size})
	r.mu.Unlock()
}
func (r *recorder) Close(c *Close) { r.mu.Lock(); r.closed[c.ConnID] = true; r.mu.Unlock() }

// streams joins the captured bytes of a connection per direction.
func (r *recorder) streams(id uint64) (egress, ingress []byte, sizes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.data[id] {
		if c.Dir == l7.Egress {
			egress = append(egress, c.Data...)
		} else {
			ingress = append(ingress, c.Data...)
		}
		sizes += c.Size
	}
	return
}

// selfTargets observes this test process only.
type selfTargets struct{ ch chan struct{} }

func (selfTargets) Mode() snoop.Mode             { return snoop.Whitelist }
func (selfTargets) Observed(pid int) bool        { return pid == os.Getpid() }
func (selfTargets) PIDs() []int                  { return []int{os.Getpid()} }
func (selfTargets) CgroupIDs() []uint64          { return nil }
func (selfTargets) Labels(int) map[string]string { return nil }
func (s selfTargets) Changed() <-chan struct{}   { return s.ch }

// TestCapturePrivileged: an HTTP/1.1 keep-alive exchange between a client
// and a server of this process is captured on both ends, byte for byte,
// with the protocol and roles inferred in the kernel; a connection of a
// protocol not enabled and a regular file are not; close() is reported.
func TestCapturePrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	rec := newRecorder()
	var lost uint64
	c, err := Open(Options{Handler: rec, OnLost: func(n uint64) { lost += n }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetConfig(Config{Protocols: []l7.Protocol{l7.HTTP}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetTargets(selfTargets{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	body := bytes.Repeat([]byte("b"), 3000)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(body)
	})}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	url := fmt.Sprintf("http://%s/x", ln.Addr())
	for i := 0; i < 3; i++ {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(b) != len(body) {
			t.Fatalf("body %d", len(b))
		}
	}
	client.CloseIdleConnections()
	// Redis is not enabled: a RESP exchange is not traced.
	rc, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = rc.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	rc.Close()
	// A regular file.
	f, _ := os.CreateTemp(t.TempDir(), "x")
	_, _ = f.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Close()

	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	conns := rec.conns
	rec.mu.Unlock()
	var client0, server0 *Conn
	for id := range conns {
		cn := conns[id]
		if cn.Proto != l7.HTTP || cn.TGID != uint32(os.Getpid()) || cn.L4 != TCP {
			t.Errorf("unexpected conn %+v", cn)
			continue
		}
		switch cn.Role {
		case l7.Client:
			client0 = &cn
		case l7.Server:
			server0 = &cn
		}
	}
	if len(conns) != 2 || client0 == nil || server0 == nil {
		t.Fatalf("conns %+v, want one client and one server", conns)
	}
	if client0.Remote != server0.Local || server0.Remote != client0.Local {
		t.Errorf("addresses: client %v->%v server %v->%v", client0.Local, client0.Remote, server0.Local, server0.Remote)
	}
	ce, ci, _ := rec.streams(client0.ID)
	se, si, _ := rec.streams(server0.ID)
	if !bytes.Equal(ce, si) || !bytes.Equal(se, ci) {
		t.Errorf("client sent %d bytes, server got %d; server sent %d, client got %d", len(ce), len(si), len(se), len(ci))
	}
	if n := bytes.Count(ce, []byte("GET /x HTTP/1.1")); n != 3 {
		t.Errorf("%d requests captured, want 3", n)
	}
	if !rec.closed[client0.ID] || !rec.closed[server0.ID] {
		t.Errorf("close not reported: %v", rec.closed)
	}
	if lost != 0 {
		t.Errorf("lost %d", lost)
	}
}
