package jmx

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Method hashes of the JMX RMI connector's remote interfaces
// (javax.management.remote.rmi.RMIServer and RMIConnection): stubs call
// by these, the server dispatches on them.
var (
	hashNewClient    = MethodHash("newClient(Ljava/lang/Object;)Ljavax/management/remote/rmi/RMIConnection;")
	hashGetAttribute = MethodHash("getAttribute(Ljavax/management/ObjectName;Ljava/lang/String;Ljavax/security/auth/Subject;)Ljava/lang/Object;")
	hashClose        = MethodHash("close()V")
)

// maxURL bounds a connector address.
const maxURL = 8 << 10

// DialFunc opens a TCP connection to addr (host:port).
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// Client is a JMX client of one JVM's local RMI connector (the one
// ManagementAgent.start_local opens and publishes as
// "service:jmx:rmi://127.0.0.1/stub/<base64 serialized stub>"): one JRMP
// connection, one RMIConnection, kept until Close. Not safe for
// concurrent use.
type Client struct {
	dial    DialFunc
	timeout time.Duration
	server  ref
	conn    ref // the RMIConnection; zero before newClient
	j       *jrmpConn
}

// ParseServiceURL reads a local connector's address: the RMIServer's
// reference from its stub.
func ParseServiceURL(url string) (ref, error) {
	if len(url) > maxURL {
		return ref{}, fmt.Errorf("jmx: connector address of %d bytes, longer than %d", len(url), maxURL)
	}
	_, stub, ok := strings.Cut(url, "/stub/")
	if !ok || !strings.HasPrefix(url, "service:jmx:rmi:") {
		return ref{}, fmt.Errorf("jmx: connector address %q is not service:jmx:rmi://.../stub/<stub>", url)
	}
	b, err := base64.StdEncoding.DecodeString(stub)
	if err != nil {
		return ref{}, fmt.Errorf("jmx: connector address %q: stub: %w", url, err)
	}
	d, err := NewDecoder(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return ref{}, fmt.Errorf("jmx: connector stub: %w", err)
	}
	v, err := d.ReadObject()
	if err != nil {
		return ref{}, fmt.Errorf("jmx: connector stub: %w", err)
	}
	return stubRef(v)
}

// Dial connects to the connector at url and opens an RMIConnection
// (RMIServer.newClient, no credentials: the local connector takes none).
// Every read and write is bounded by timeout.
func Dial(ctx context.Context, url string, dial DialFunc, timeout time.Duration) (*Client, error) {
	srv, err := ParseServiceURL(url)
	if err != nil {
		return nil, err
	}
	c := &Client{dial: dial, timeout: timeout, server: srv}
	if err := c.newClient(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// open makes the JRMP connection to port on loopback: the local
// connector listens on every address but accepts local callers only, so
// the stub's host (the JVM's idea of its own address) is not dialled.
func (c *Client) open(ctx context.Context, port int) error {
	if c.j != nil {
		c.j.c.Close()
		c.j = nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	nc, err := c.dial(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("jmx: connect: %w", err)
	}
	j, err := handshake(nc, c.timeout)
	if err != nil {
		nc.Close()
		return fmt.Errorf("jmx: %w", err)
	}
	c.j = j
	return nil
}

func (c *Client) newClient(ctx context.Context) error {
	if err := c.open(ctx, c.server.Port); err != nil {
		return err
	}
	v, err := c.j.call(c.server.ID, hashNewClient, false, func(e *Encoder) error { e.Null(); return nil })
	if err != nil {
		return fmt.Errorf("jmx: newClient: %w", err)
	}
	r, err := stubRef(v)
	if err != nil {
		return fmt.Errorf("jmx: newClient: %w", err)
	}
	if r.Port != c.server.Port {
		if err := c.open(ctx, r.Port); err != nil {
			return err
		}
	}
	c.conn = r
	return nil
}

// GetAttribute reads one attribute of an MBean. A connection the JVM
// closed is reopened once (and the RMIConnection with it: the server
// closes an idle one); a remote exception is returned as a *RemoteError.
func (c *Client) GetAttribute(ctx context.Context, objectName, attribute string) (any, error) {
	args := func(e *Encoder) error {
		if err := e.ObjectName(objectName); err != nil {
			return err
		}
		if err := e.String(attribute); err != nil {
			return err
		}
		e.Null() // delegation Subject
		return nil
	}
	if err := checkObjectName(objectName); err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		if c.j == nil {
			if err := c.newClient(ctx); err != nil {
				return nil, err
			}
		}
		v, err := c.j.call(c.conn.ID, hashGetAttribute, false, args)
		if err == nil {
			return v, nil
		}
		var re *RemoteError
		if errors.As(err, &re) && !stale(re) {
			return nil, err
		}
		// A stale RMIConnection or a socket the JVM closed: start again
		// once. Not after a timeout: a hung JVM would cost two.
		c.j.c.Close()
		c.j = nil
		var ne net.Error
		if try > 0 || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return nil, fmt.Errorf("jmx: getAttribute %s %s: %w", objectName, attribute, err)
		}
	}
}

// stale says a remote exception is that of an RMIConnection the server
// closed (idle past jmx.remote.x.server.connection.timeout) or
// unexported.
func stale(e *RemoteError) bool {
	return e.Class == "java.rmi.NoSuchObjectException" ||
		(e.Class == "java.io.IOException" && strings.Contains(e.Message, "closed"))
}

// CloseWithin is Close with every read and write bounded by d.
func (c *Client) CloseWithin(d time.Duration) error {
	if c.j != nil {
		c.j.timeout = d
	}
	return c.Close()
}

// Close closes the RMIConnection (so the JVM frees it) and the socket.
func (c *Client) Close() error {
	if c.j == nil {
		return nil
	}
	var err error
	if c.conn.Port != 0 {
		_, err = c.j.call(c.conn.ID, hashClose, true, nil)
	}
	c.j.c.Close()
	c.j = nil
	return err
}

// Long is the value of a boxed java.lang.Long, Integer, Short or Byte.
func Long(v any) (int64, bool) {
	o, ok := v.(*Object)
	if !ok {
		return 0, false
	}
	switch o.Class.Name {
	case "java.lang.Long", "java.lang.Integer", "java.lang.Short", "java.lang.Byte":
	default:
		return 0, false
	}
	f, _ := o.Field("value")
	switch n := f.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int16:
		return int64(n), true
	case int8:
		return int64(n), true
	}
	return 0, false
}

// Composite is the items of a javax.management.openmbean.CompositeDataSupport
// (its contents, a TreeMap: written as the size, then key and value
// objects).
func Composite(v any) (map[string]any, bool) {
	o, ok := v.(*Object)
	if !ok || o.Class.Name != "javax.management.openmbean.CompositeDataSupport" {
		return nil, false
	}
	c, _ := o.Field("contents")
	m, ok := c.(*Object)
	if !ok {
		return nil, false
	}
	var objs []any
	for _, a := range m.Annotation("java.util.TreeMap") {
		if _, ok := a.(BlockData); !ok {
			objs = append(objs, a)
		}
	}
	if len(objs)%2 != 0 {
		return nil, false
	}
	out := make(map[string]any, len(objs)/2)
	for i := 0; i < len(objs); i += 2 {
		k, ok := objs[i].(string)
		if !ok {
			return nil, false
		}
		out[k] = objs[i+1]
	}
	return out, true
}
