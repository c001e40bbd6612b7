package logpattern

import (
	"bytes"
	"encoding/json"
)

// Stream names a container's output stream.
type Stream uint8

const (
	Stdout Stream = iota
	Stderr
)

// ParseCRI parses one line of a CRI container log file (kubelet's format,
// written by containerd and CRI-O):
//
//	<RFC3339Nano time> <stdout|stderr> <P|F>[:more tags] <message>
//
// partial is set for a "P" line, the first part of a message the runtime
// split; its rest follows in the next lines of the same stream, up to an
// "F" line.
func ParseCRI(line []byte) (msg []byte, stream Stream, partial bool, ok bool) {
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return nil, 0, false, false
	}
	rest := line[sp+1:]
	switch {
	case bytes.HasPrefix(rest, []byte("stdout ")):
		stream, rest = Stdout, rest[len("stdout "):]
	case bytes.HasPrefix(rest, []byte("stderr ")):
		stream, rest = Stderr, rest[len("stderr "):]
	default:
		return nil, 0, false, false
	}
	tagEnd := bytes.IndexByte(rest, ' ')
	tags := rest
	if tagEnd >= 0 {
		tags, msg = rest[:tagEnd], rest[tagEnd+1:]
	}
	if i := bytes.IndexByte(tags, ':'); i >= 0 {
		tags = tags[:i]
	}
	switch string(tags) {
	case "P":
		partial = true
	case "F":
	default:
		return nil, 0, false, false
	}
	return msg, stream, partial, true
}

type dockerLine struct {
	Log    string `json:"log"`
	Stream string `json:"stream"`
}

// ParseDockerJSON parses one line of Docker's json-file log driver:
//
//	{"log":"message\n","stream":"stdout","time":"..."}
//
// A message the daemon split (over 16 KiB) comes as lines whose log does
// not end in a newline: partial is set for those.
func ParseDockerJSON(line []byte) (msg []byte, stream Stream, partial bool, ok bool) {
	var d dockerLine
	if err := json.Unmarshal(line, &d); err != nil {
		return nil, 0, false, false
	}
	switch d.Stream {
	case "stdout", "":
	case "stderr":
		stream = Stderr
	default:
		return nil, 0, false, false
	}
	s := d.Log
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
		if n := len(s); n > 0 && s[n-1] == '\r' {
			s = s[:n-1]
		}
	} else {
		partial = true
	}
	return []byte(s), stream, partial, true
}

// Joiner reassembles a message a runtime split into partial lines, keeping
// its first MaxTemplate bytes: all that grouping and clustering look at, so
// a file's pending state stays small.
type Joiner struct {
	buf   []byte
	start int64
	has   bool
}

// Add takes one part at position off; when the part is the last (not
// partial) it returns the whole message and the position of its first
// part.
func (j *Joiner) Add(part []byte, partial bool, off int64) ([]byte, int64, bool) {
	if !j.has {
		j.buf, j.start, j.has = j.buf[:0], off, true
	}
	if room := MaxTemplate - len(j.buf); room > 0 {
		if len(part) > room {
			part = part[:room]
		}
		j.buf = append(j.buf, part...)
	}
	if partial {
		return nil, 0, false
	}
	j.has = false
	return j.buf, j.start, true
}

// Pending reports the position of a message still being joined.
func (j *Joiner) Pending() (int64, bool) { return j.start, j.has }
