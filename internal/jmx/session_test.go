package jmx

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// record is one write of a recorded JRMP session: 'C' the client's, 'S'
// the server's.
type record struct {
	dir  byte
	data []byte
}

// readSession reads testdata/session-jdk17.bin: a session of this client
// with a JDK 17 JVM's local connector, recorded at the socket (each
// record: direction, big-endian length, bytes).
func readSession(t testing.TB, name string) []record {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	for len(b) > 0 {
		if len(b) < 5 {
			t.Fatalf("%s: truncated", name)
		}
		n := int(binary.BigEndian.Uint32(b[1:]))
		out = append(out, record{b[0], b[5 : 5+n]})
		b = b[5+n:]
	}
	return out
}

// fakeJVM replays the server's side of recorded sessions on a loopback
// listener, one script per connection accepted, checking that the client
// sends byte for byte what the real JVM was sent; a script's end closes
// its connection. The first difference is reported on errc, else nil
// once every script ran.
func fakeJVM(t *testing.T, scripts ...[]record) (DialFunc, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	errc := make(chan error, 1)
	go func() {
		for _, recs := range scripts {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			err = replay(c, recs)
			c.Close()
			if err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if addr != "127.0.0.1:41317" { // the stub's port, on loopback
			return nil, fmt.Errorf("dialled %s", addr)
		}
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	}, errc
}

func replay(c net.Conn, recs []record) error {
	for i, r := range recs {
		if r.dir == 'S' {
			if _, err := c.Write(r.data); err != nil {
				return err
			}
			continue
		}
		got := make([]byte, len(r.data))
		if _, err := io.ReadFull(c, got); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if !bytes.Equal(got, r.data) {
			return fmt.Errorf("record %d: client sent\n%x\nthe JVM was sent\n%x", i, got, r.data)
		}
	}
	return nil
}

func serviceURL(t testing.TB) string {
	b, err := os.ReadFile("testdata/service-url-jdk17.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestSessionReplay runs the client against the recorded JVM: the calls'
// bytes must be what the JVM accepted, the values what it answered.
func TestSessionReplay(t *testing.T) {
	dial, errc := fakeJVM(t, readSession(t, "session-jdk17.bin"))
	ctx := context.Background()
	c, err := Dial(ctx, serviceURL(t), dial, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.conn.Port != 41317 || c.conn.ID.Num == c.server.ID.Num {
		t.Errorf("RMIConnection ref %+v, server %+v", c.conn, c.server)
	}
	get := func(obj, attr string) any {
		t.Helper()
		v, err := c.GetAttribute(ctx, obj, attr)
		if err != nil {
			t.Fatalf("%s %s: %v", obj, attr, err)
		}
		return v
	}
	if n, ok := Long(get("java.nio:type=BufferPool,name=direct", "Count")); !ok || n != 3 {
		t.Errorf("direct Count %v %v, the JVM answered 3", n, ok)
	}
	if n, ok := Long(get("java.nio:type=BufferPool,name=mapped", "TotalCapacity")); !ok || n != 0 {
		t.Errorf("mapped TotalCapacity %v %v, the JVM answered 0", n, ok)
	}
	m, ok := Composite(get("java.lang:type=MemoryPool,name=G1 Old Gen", "CollectionUsage"))
	if !ok {
		t.Fatal("CollectionUsage is not a CompositeData")
	}
	want := map[string]int64{"init": 377487360, "used": 0, "committed": 0, "max": 6320816128}
	for k, w := range want {
		if n, ok := Long(m[k]); !ok || n != w {
			t.Errorf("CollectionUsage %s = %v %v, the JVM answered %d", k, n, ok, w)
		}
	}
	if v := get("java.lang:type=MemoryPool,name=Metaspace", "CollectionUsage"); v != nil {
		t.Errorf("Metaspace CollectionUsage %s, the JVM answered null", Describe(v))
	}
	_, err = c.GetAttribute(ctx, "java.lang:type=MemoryPool,name=nope", "CollectionUsage")
	var re *RemoteError
	if !errors.As(err, &re) || re.Class != "javax.management.InstanceNotFoundException" || re.Message != "java.lang:type=MemoryPool,name=nope" {
		t.Errorf("unknown MBean: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
}

// TestRedial: a connection the JVM closes (its connector drops idle
// ones) is dialled again, with a new RMIConnection, and the call made
// there.
func TestRedial(t *testing.T) {
	recs := readSession(t, "session-jdk17.bin")
	// The first connection ends when the first getAttribute is sent
	// (record 6), unanswered.
	dial, errc := fakeJVM(t, recs[:7], recs[:8])
	ctx := context.Background()
	c, err := Dial(ctx, serviceURL(t), dial, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.GetAttribute(ctx, "java.nio:type=BufferPool,name=direct", "Count")
	if n, ok := Long(v); err != nil || !ok || n != 3 {
		t.Errorf("direct Count %v %v %v, the JVM answered 3", n, ok, err)
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
}

// TestMethodHashes: the hashes the JDK's stubs carry (javap -c of
// RMIServerImpl_Stub and RMIConnectionImpl_Stub).
func TestMethodHashes(t *testing.T) {
	for _, c := range []struct {
		got, want int64
	}{{hashNewClient, -1089742558549201240}, {hashGetAttribute, -1089783104982388203}, {hashClose, -4742752445160157748}} {
		if c.got != c.want {
			t.Errorf("hash %d, the JDK's stub %d", c.got, c.want)
		}
	}
}

func TestParseServiceURL(t *testing.T) {
	r, err := ParseServiceURL(serviceURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Host != "127.0.0.1" || r.Port != 41317 {
		t.Errorf("endpoint %s:%d", r.Host, r.Port)
	}
	for _, bad := range []string{"", "service:jmx:rmi://127.0.0.1/jndi/x", "service:jmx:rmi://127.0.0.1/stub/!!", "service:jmx:rmi://127.0.0.1/stub/rO0ABXQAAWE=",
		"http://x/stub/" + strings.SplitN(serviceURL(t), "/stub/", 2)[1]} {
		if _, err := ParseServiceURL(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestTimeout: a JVM that accepts and never answers costs one timeout,
// not a hang.
func TestTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	var d net.Dialer
	start := time.Now()
	_, err = Dial(context.Background(), serviceURL(t), func(ctx context.Context, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	}, 200*time.Millisecond)
	if err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("silent server: %v after %v", err, time.Since(start))
	}
}
