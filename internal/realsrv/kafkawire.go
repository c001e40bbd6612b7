package realsrv

import (
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaWire is a Kafka broker's own count of the records on its
// connections, decoded with franz-go's kmsg from the plaintext bytes the
// broker read and wrote: "Producer <topic>" the records of every Produce
// request it received, "Consumer <topic>" the records of every Fetch
// response it sent. A request that arrives twice (a client's retry)
// counts twice: this is what was on the wire, which is what a capture of
// the connections sees. Its Listen is the broker's listener (kfake's
// ListenFn), with TLS terminated under the count when a config is given.
type KafkaWire struct {
	mu sync.Mutex
	n  map[string]uint64
	// names are topic ids from the Metadata responses sent, for Produce
	// requests and Fetch responses that name topics by id (v13+).
	names map[[16]byte]string
	err   error
}

// NewKafkaWire returns an empty count.
func NewKafkaWire() *KafkaWire {
	return &KafkaWire{n: map[string]uint64{}, names: map[[16]byte]string{}}
}

// Listen returns a listen function (kfake.ListenFn) whose connections are
// counted; with tc, they are TLS connections counted from their plaintext.
func (w *KafkaWire) Listen(tc *tls.Config) func(network, addr string) (net.Listener, error) {
	return func(network, addr string) (net.Listener, error) {
		l, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return &wireListener{Listener: l, w: w, tc: tc}, nil
	}
}

// Counts returns the records counted so far, or the first error met
// decoding the connections (the counts are then not the wire's).
func (w *KafkaWire) Counts() (map[string]uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.n), w.err
}

func (w *KafkaWire) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

type wireListener struct {
	net.Listener
	w  *KafkaWire
	tc *tls.Config
}

func (l *wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	wc := &wireConn{w: l.w, pending: map[int32]apiVersion{}}
	if l.tc != nil {
		c = tls.Server(c, l.tc)
	}
	wc.Conn = c
	return wc, nil
}

type apiVersion struct{ key, version int16 }

// wireConn decodes the requests read and the responses written on one
// connection. The broker reads and writes from two goroutines.
type wireConn struct {
	net.Conn
	w        *KafkaWire
	mu       sync.Mutex
	in, out  []byte
	pending  map[int32]apiVersion // correlation id -> request
	disabled bool                 // after a decoding error
}

func (c *wireConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.feed(&c.in, b[:n], c.request)
	}
	return n, err
}

// Write counts a response before it is sent: a client that has read it
// (and exited) finds it counted.
func (c *wireConn) Write(b []byte) (int, error) {
	c.feed(&c.out, b, c.response)
	return c.Conn.Write(b)
}

// feed appends p to the stream buf and decodes its complete frames.
func (c *wireConn) feed(buf *[]byte, p []byte, frame func([]byte) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disabled {
		return
	}
	*buf = append(*buf, p...)
	for len(*buf) >= 4 {
		size := int(binary.BigEndian.Uint32(*buf))
		if len(*buf) < 4+size {
			return
		}
		if err := frame((*buf)[4 : 4+size]); err != nil {
			c.disabled = true
			c.w.fail(fmt.Errorf("connection from %s: %w", c.RemoteAddr(), err))
			return
		}
		*buf = (*buf)[4+size:]
	}
}

// request decodes one request (c.mu held): a Produce request's records
// are counted; every request's API is kept for its response.
func (c *wireConn) request(b []byte) error {
	r := kbin.Reader{Src: b}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	r.NullableString() // client id
	req := kmsg.RequestForKey(key)
	if req == nil {
		return fmt.Errorf("request of unknown API key %d", key)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%s v%d request header: %w", kmsg.NameForKey(key), version, err)
	}
	if p, ok := req.(*kmsg.ProduceRequest); ok {
		if err := p.ReadFrom(r.Src); err != nil {
			return fmt.Errorf("produce v%d request: %w", version, err)
		}
		if p.Acks != 0 {
			c.pending[corr] = apiVersion{key, version}
		}
		for _, t := range p.Topics {
			for _, pt := range t.Partitions {
				if err := c.w.add("Producer", t.Topic, t.TopicID, pt.Records); err != nil {
					return fmt.Errorf("produce v%d request: %w", version, err)
				}
			}
		}
		return nil
	}
	c.pending[corr] = apiVersion{key, version}
	return nil
}

// response decodes one response (c.mu held): a Fetch response's records
// are counted, a Metadata response's topic ids learnt.
func (c *wireConn) response(b []byte) error {
	r := kbin.Reader{Src: b}
	corr := r.Int32()
	req, ok := c.pending[corr]
	if !ok {
		return fmt.Errorf("response to correlation id %d, which no request had", corr)
	}
	delete(c.pending, corr)
	resp := kmsg.ResponseForKey(req.key)
	resp.SetVersion(req.version)
	if resp.IsFlexible() && req.key != kmsg.ApiVersions.Int16() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%s v%d response header: %w", kmsg.NameForKey(req.key), req.version, err)
	}
	switch resp := resp.(type) {
	case *kmsg.FetchResponse:
		if err := resp.ReadFrom(r.Src); err != nil {
			return fmt.Errorf("fetch v%d response: %w", req.version, err)
		}
		for _, t := range resp.Topics {
			for _, pt := range t.Partitions {
				if err := c.w.add("Consumer", t.Topic, t.TopicID, pt.RecordBatches); err != nil {
					return fmt.Errorf("fetch v%d response: %w", req.version, err)
				}
			}
		}
	case *kmsg.MetadataResponse:
		if err := resp.ReadFrom(r.Src); err != nil {
			return fmt.Errorf("metadata v%d response: %w", req.version, err)
		}
		c.w.mu.Lock()
		for _, t := range resp.Topics {
			if t.Topic != nil && t.TopicID != ([16]byte{}) {
				c.w.names[t.TopicID] = *t.Topic
			}
		}
		c.w.mu.Unlock()
	}
	return nil
}

// add counts the records of the v2 record batches in batches as kind's
// on a topic (named, or by id). A partial batch at the end (a Fetch
// response cut at its size limit) holds no record a client can read and
// is not counted.
func (w *KafkaWire) add(kind, topic string, id [16]byte, batches []byte) error {
	var n uint64
	for len(batches) >= 12 {
		total := 12 + int(int32(binary.BigEndian.Uint32(batches[8:12])))
		if total < 12 || len(batches) < total {
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batches[:total]); err != nil {
			return fmt.Errorf("record batch: %w", err)
		}
		if rb.Magic != 2 {
			return fmt.Errorf("record batch of magic %d: only v2 batches are counted", rb.Magic)
		}
		if rb.NumRecords < 0 {
			return fmt.Errorf("record batch of %d records", rb.NumRecords)
		}
		n += uint64(rb.NumRecords)
		batches = batches[total:]
	}
	if n == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if topic == "" {
		if topic = w.names[id]; topic == "" {
			topic = hex.EncodeToString(id[:])
		}
	}
	w.n[kind+" "+topic] += n
	return nil
}
