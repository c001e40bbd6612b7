package syscap

import (
	"bufio"
	"io"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// pingServer answers every RESP PING on its connections with +PONG.
func pingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				buf := make([]byte, len(ping))
				for {
					if _, err := io.ReadFull(br, buf); err != nil {
						return
					}
					if _, err := c.Write([]byte("+PONG\r\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

const ping = "*1\r\n$4\r\nPING\r\n"

// pings sends n PINGs on a new connection and reads the replies.
func pings(t *testing.T, addr string, n int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, len("+PONG\r\n"))
	for range n {
		if _, err := c.Write([]byte(ping)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}
}

// chunks counts a recorder's Data records of this process's connections.
func (r *recorder) chunks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id, cs := range r.data {
		if c, ok := r.conns[id]; ok && c.TGID == uint32(os.Getpid()) {
			n += len(cs)
		}
	}
	return n
}

// TestSharedPrivileged: two consumers of one capture, one with snoopers
// (this process) and one without: both get every record of this
// process's connections; when one leaves, the other goes on with the
// kernel traced for it alone; the last one closes the capture.
func TestSharedPrivileged(t *testing.T) {
	probetest.RequirePrivileged(t)
	const n = 50
	addr := pingServer(t)
	s := NewShared(Options{})
	ra, rb := newRecorder(), newRecorder()
	a, err := s.Subscribe(ra, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Subscribe(rb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetTargets(selfTargets{make(chan struct{})}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []*Sub{a, b} {
		if err := sub.SetConfig(Config{Protocols: []l7.Protocol{l7.Redis}}); err != nil {
			t.Fatal(err)
		}
	}
	pings(t, addr, n)
	// Each side of the one connection: n writes and n reads.
	probetest.WaitFor(t, "both consumers' records", func() bool { return ra.chunks() == 4*n && rb.chunks() == 4*n })
	if !slices.Equal(s.Protocols(), []l7.Protocol{l7.Redis}) {
		t.Errorf("kernel protocols %v", s.Protocols())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	pings(t, addr, n)
	probetest.WaitFor(t, "the remaining consumer's records", func() bool { return ra.chunks() == 8*n })
	if got := rb.chunks(); got != 4*n {
		t.Errorf("closed consumer got %d chunks, want %d", got, 4*n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	open := s.c != nil
	s.mu.Unlock()
	if open {
		t.Error("capture still open after its last consumer closed")
	}
}
