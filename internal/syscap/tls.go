package syscap

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// OpenSSL's plaintext entry points: the probe at entry (the buffer) and
// at return (the bytes moved). The _ex variants exist since OpenSSL 1.1.1.
// SSL_do_handshake (which SSL_accept and SSL_connect call) is probed for
// the socket it reads and writes: a new connection's first SSL_read may be
// answered from what OpenSSL already holds, with no syscall to name it.
var opensslProbes = []struct {
	symbol    string
	prog, ret func(*syscapObjects) *ebpf.Program
	data      bool // moves plaintext (the file is OpenSSL only with one of these)
}{
	{"SSL_write", func(o *syscapObjects) *ebpf.Program { return o.SslWriteEnter }, sslReturn, true},
	{"SSL_read", func(o *syscapObjects) *ebpf.Program { return o.SslReadEnter }, sslReturn, true},
	{"SSL_write_ex", func(o *syscapObjects) *ebpf.Program { return o.SslWriteExEnter }, sslReturn, true},
	{"SSL_read_ex", func(o *syscapObjects) *ebpf.Program { return o.SslReadExEnter }, sslReturn, true},
	{"SSL_do_handshake", func(o *syscapObjects) *ebpf.Program { return o.SslHandshakeEnter },
		func(o *syscapObjects) *ebpf.Program { return o.SslHandshakeReturn }, false},
}

func sslReturn(o *syscapObjects) *ebpf.Program { return o.SslReturn }

// fileID is a file's identity: uprobes attach to an inode, whatever path
// (host or container root) names it.
type fileID struct{ dev, ino uint64 }

// ErrNoOpenSSL says a file has none of OpenSSL's SSL_read/SSL_write.
var ErrNoOpenSSL = errors.New("no OpenSSL SSL_read/SSL_write symbols")

// AttachOpenSSL attaches the TLS uprobes to the OpenSSL in the ELF file at
// path (libssl.so.*, or an executable that links OpenSSL statically with
// its symbols). A file already attached (the same inode under any path)
// is not attached again: attached reports false then. From the first
// attachment on, the syscall program notes the fd of every TLS call.
func (c *Capture) AttachOpenSSL(path string) (attached bool, err error) {
	id, err := fileIDOf(path)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, done := c.tlsFiles[id]; done {
		return false, nil
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return false, err
	}
	var links []link.Link
	data := false
	for _, p := range opensslProbes {
		if !p.data && !data {
			break // not OpenSSL: none of its data functions
		}
		enter, err := ex.Uprobe(p.symbol, p.prog(&c.objs), nil)
		if err != nil {
			if errors.Is(err, link.ErrNoSymbol) || errors.Is(err, os.ErrNotExist) || errors.Is(err, link.ErrNotSupported) {
				// No _ex variants before 1.1.1; an executable that only
				// imports SSL_write (undefined here, in libssl) is not
				// OpenSSL itself: its libssl is attached on its own.
				continue
			}
			closeAll(links)
			return false, fmt.Errorf("uprobe %s:%s: %w", path, p.symbol, err)
		}
		ret, err := ex.Uretprobe(p.symbol, p.ret(&c.objs), nil)
		if err != nil {
			enter.Close()
			closeAll(links)
			return false, fmt.Errorf("uretprobe %s:%s: %w", path, p.symbol, err)
		}
		links = append(links, enter, ret)
		data = data || p.data
	}
	if !data {
		c.tlsFiles[id] = nil // remember: nothing to attach here
		return false, ErrNoOpenSSL
	}
	c.tlsFiles[id] = links
	if !c.tlsOn {
		if err := c.setTLSLocked(true); err != nil {
			return true, err
		}
	}
	return true, nil
}

func fileIDOf(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{st.Dev, st.Ino}, nil
}

func closeAll(links []link.Link) {
	for _, l := range links {
		l.Close()
	}
}

// DetachTLS removes every TLS uprobe; TLS connections are no longer
// traced (their plaintext stops; their ciphertext was never traced).
func (c *Capture) DetachTLS() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, links := range c.tlsFiles {
		closeAll(links)
		delete(c.tlsFiles, id)
	}
	for id, links := range c.goFiles {
		closeAll(links)
		delete(c.goFiles, id)
	}
	if c.tlsOn {
		return c.setTLSLocked(false)
	}
	return nil
}
