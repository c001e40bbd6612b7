// Package lenframe frames one direction of a connection into messages that
// declare their own length in a fixed-size header (Kafka, MongoDB, CRPC),
// without buffering the messages: the header is kept (a few bytes), the
// rest is streamed to a Sink as it arrives and skipped by count where the
// capture has a gap.
//
// A gap that falls inside a message costs nothing but the bytes in it (the
// Sink is told their count). A gap that hides a message boundary loses the
// framing: the Framer counts a desync and resynchronises at the start of a
// later chunk whose first bytes are a valid header (syscalls usually start
// at a message boundary), dropping the chunks before it.
package lenframe

import "github.com/galago-project/galago/internal/l7"

// MaxHeader is the largest header a Framer can hold.
const MaxHeader = 32

// Sink receives one direction's messages.
type Sink interface {
	// Start begins a message of total bytes (header included) whose first
	// byte arrived in a chunk with timestamp ts; hdr is its header.
	Start(hdr []byte, total int, ts uint64)
	// Data is the next captured run of the message's bytes after the header.
	Data(b []byte)
	// Gap says the next n bytes of the message were not captured.
	Gap(n int)
	// End completes the message.
	End()
}

// Framer frames one direction. HeaderLen and Length must be set before
// use; the zero value of the rest is ready.
type Framer struct {
	// HeaderLen is how many bytes (at most MaxHeader) decide a message's
	// length and validity.
	HeaderLen int
	// Length returns the message's total length (header included) from its
	// header, or -1 when hdr is not a valid header. It must return at least
	// HeaderLen for a valid header.
	Length func(hdr []byte) int

	hdr     [MaxHeader]byte
	nhdr    int
	hdrTS   uint64
	rem     int // bytes of the current message still to come after its header
	inMsg   bool
	lost    bool
	desyncs uint64
}

// Desyncs counts the times the framing was lost.
func (f *Framer) Desyncs() uint64 { return f.desyncs }

// Lost says the framing is lost until a later chunk starts with a header.
func (f *Framer) Lost() bool { return f.lost }

// Reset drops the message in progress without counting a desync (the
// caller decided the stream is not worth following, e.g. an invalid
// message body) and resynchronises at the next chunk start.
func (f *Framer) Reset() {
	f.nhdr, f.rem, f.inMsg, f.lost = 0, 0, false, true
}

// Feed frames one chunk's bytes, calling s for every message event.
func (f *Framer) Feed(c *l7.Chunk, s Sink) {
	data := c.Data
	gap := c.Size - len(data)
	if gap < 0 {
		gap = 0
	}
	if f.lost {
		// Resynchronise only where a syscall starts with a whole valid
		// header: anything else is as likely a message's middle.
		if len(data) < f.HeaderLen || f.Length(data[:f.HeaderLen]) < 0 {
			return
		}
		f.lost = false
	}
	for len(data) > 0 {
		if !f.inMsg {
			if f.nhdr == 0 {
				f.hdrTS = c.TS
			}
			n := copy(f.hdr[f.nhdr:f.HeaderLen], data)
			f.nhdr += n
			data = data[n:]
			if f.nhdr < f.HeaderLen {
				break
			}
			total := f.Length(f.hdr[:f.HeaderLen])
			if total < f.HeaderLen {
				f.desync()
				return
			}
			f.inMsg = true
			f.rem = total - f.HeaderLen
			s.Start(f.hdr[:f.HeaderLen], total, f.hdrTS)
			if f.lost { // the sink reset the framer
				return
			}
			if f.rem == 0 {
				f.end(s)
			}
			continue
		}
		n := min(f.rem, len(data))
		s.Data(data[:n])
		if f.lost {
			return
		}
		f.rem -= n
		data = data[n:]
		if f.rem == 0 {
			f.end(s)
		}
	}
	for gap > 0 {
		if !f.inMsg {
			// A message starts inside the gap: its header, and so every
			// boundary after it, is unknown.
			f.desync()
			return
		}
		n := min(f.rem, gap)
		s.Gap(n)
		if f.lost {
			return
		}
		f.rem -= n
		gap -= n
		if f.rem == 0 {
			f.end(s)
		}
	}
}

func (f *Framer) end(s Sink) {
	f.inMsg = false
	f.nhdr = 0
	s.End()
}

func (f *Framer) desync() {
	f.desyncs++
	f.nhdr, f.rem, f.inMsg, f.lost = 0, 0, false, true
}

// Duplex frames both directions of a connection: requests, in the
// direction the observed role sends or receives them, and responses.
type Duplex struct {
	Req, Resp Framer
}

// Desyncs counts the times either direction lost its framing.
func (d *Duplex) Desyncs() uint64 { return d.Req.Desyncs() + d.Resp.Desyncs() }

// Feed frames chunk c, seen from role's side, into req or resp.
func (d *Duplex) Feed(role l7.Role, c *l7.Chunk, req, resp Sink) {
	if c.Dir == role.RequestDir() {
		d.Req.Feed(c, req)
	} else {
		d.Resp.Feed(c, resp)
	}
}
