package applog

import (
	"bytes"
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/logpattern"
)

// fileID names a file by device and inode: a rotated file keeps its id
// under its new name, and a new file at the old name has another.
type fileID struct{ Dev, Ino uint64 }

// fileStat is what a log file's statx gives.
type fileStat struct {
	id    fileID
	size  int64
	btime int64 // birth time, unix ns; 0 when the file system does not keep it
}

func statFile(path string) (fileStat, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_INO|unix.STATX_SIZE|unix.STATX_BTIME|unix.STATX_TYPE, &stx); err != nil {
		return fileStat{}, err
	}
	if stx.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileStat{}, errors.New("not a regular file")
	}
	st := fileStat{id: fileID{unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino}, size: int64(stx.Size)}
	if stx.Mask&unix.STATX_BTIME != 0 {
		st.btime = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	}
	return st, nil
}

// tracked is one log file being read.
type tracked struct {
	st     fileStat
	path   string
	format format
	src    *source
	f      *os.File
	off    int64 // next byte to read
	skip   bool  // inside a line longer than MaxLine: drop up to its newline
	g      logpattern.Grouper
	j      [2]logpattern.Joiner // per stream, CRI and Docker
	seen   uint64               // discovery generation that last found it
	// drainTo is, once no discovery finds the file any more, its size
	// then: it is read up to there and let go (-1 while it is found).
	drainTo int64
}

// committed is the offset up to which every message is counted: a restart
// resumes there, before a message still being assembled.
func (t *tracked) committed() int64 {
	c := t.off
	if s, ok := t.g.Pending(); ok && s < c {
		c = s
	}
	for i := range t.j {
		if s, ok := t.j[i].Pending(); ok && s < c {
			c = s
		}
	}
	return c
}

// readChunk is the size of one read; it must exceed MaxLine.
const readChunk = 64 << 10

// read reads complete lines from t.off, at most budget bytes, and hands
// them to the line handler; a last line without its newline is left for
// the next poll. It returns the bytes consumed.
func (p *Probe) read(t *tracked, budget int64) (int64, error) {
	var total int64
	for budget >= readChunk {
		n, err := t.f.ReadAt(p.buf, t.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return total, err
		}
		if n == 0 {
			break
		}
		data := p.buf[:n]
		consumed := 0
		for {
			i := bytes.IndexByte(data[consumed:], '\n')
			if i < 0 {
				break
			}
			if t.skip {
				t.skip = false
			} else {
				p.line(t, data[consumed:consumed+i], t.off+int64(consumed))
			}
			consumed += i + 1
		}
		if consumed == 0 && n-consumed >= logpattern.MaxLine {
			// A line longer than MaxLine: its head counts, its rest is
			// dropped up to the newline.
			if !t.skip {
				p.line(t, data[:logpattern.MaxLine], t.off)
				t.skip = true
			}
			consumed = n
		}
		t.off += int64(consumed)
		total += int64(consumed)
		budget -= int64(consumed)
		if consumed == 0 || n < len(p.buf) {
			break
		}
	}
	return total, nil
}

// line takes one line of t at offset off.
func (p *Probe) line(t *tracked, line []byte, off int64) {
	p.linesRead++
	var (
		msg     []byte
		stream  logpattern.Stream
		partial bool
		ok      bool
	)
	switch t.format {
	case fmtPlain:
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		p.group(t, line, off)
		return
	case fmtCRI:
		msg, stream, partial, ok = logpattern.ParseCRI(line)
	case fmtDocker:
		msg, stream, partial, ok = logpattern.ParseDockerJSON(line)
	}
	if !ok {
		p.malformed++
		return
	}
	if full, start, done := t.j[stream].Add(msg, partial, off); done {
		p.group(t, full, start)
	}
}

func (p *Probe) group(t *tracked, line []byte, off int64) {
	if m, ok := t.g.Add(line, off); ok {
		t.src.account(m)
	}
}

// flush counts the message t is assembling as complete.
func (t *tracked) flush() {
	if m, ok := t.g.Flush(); ok {
		t.src.account(m)
	}
}
