package syscap

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/galago-project/galago/internal/elfsym"
)

// OpenSSL's plaintext entry points: the probe at entry (the buffer) and
// at return (the bytes moved). The _ex variants exist since OpenSSL 1.1.1.
// SSL_do_handshake (which SSL_accept and SSL_connect call) is probed for
// the socket it reads and writes: a new connection's first SSL_read may be
// answered from what OpenSSL already holds, with no syscall to name it.
var opensslProbes = []struct {
	symbol    string
	prog, ret func(*syscapObjects) *ebpf.Program
}{
	{"SSL_write", func(o *syscapObjects) *ebpf.Program { return o.SslWriteEnter }, sslReturn},
	{"SSL_read", func(o *syscapObjects) *ebpf.Program { return o.SslReadEnter }, sslReturn},
	{"SSL_write_ex", func(o *syscapObjects) *ebpf.Program { return o.SslWriteExEnter }, sslReturn},
	{"SSL_read_ex", func(o *syscapObjects) *ebpf.Program { return o.SslReadExEnter }, sslReturn},
	{"SSL_do_handshake", func(o *syscapObjects) *ebpf.Program { return o.SslHandshakeEnter },
		func(o *syscapObjects) *ebpf.Program { return o.SslHandshakeReturn }},
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
	offs, err := opensslOffsets(path)
	if err != nil {
		if errors.Is(err, ErrNoOpenSSL) {
			c.tlsFiles[id] = nil // remember: nothing to attach here
		}
		return false, err
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return false, err
	}
	var links []link.Link
	for _, p := range opensslProbes {
		off, ok := offs[p.symbol]
		if !ok {
			continue // no _ex variants before 1.1.1
		}
		// The address given: cilium/ebpf never reads the file's symbols.
		opts := &link.UprobeOptions{Address: off}
		enter, err := ex.Uprobe(p.symbol, p.prog(&c.objs), opts)
		if err != nil {
			closeAll(links)
			return false, fmt.Errorf("uprobe %s:%s: %w", path, p.symbol, err)
		}
		ret, err := ex.Uretprobe(p.symbol, p.ret(&c.objs), opts)
		if err != nil {
			enter.Close()
			closeAll(links)
			return false, fmt.Errorf("uretprobe %s:%s: %w", path, p.symbol, err)
		}
		links = append(links, enter, ret)
	}
	c.tlsFiles[id] = links
	if !c.tlsOn {
		if err := c.setTLSLocked(true); err != nil {
			return true, err
		}
	}
	return true, nil
}

// opensslOffsets are the file offsets of the OpenSSL functions probed
// that the ELF file at path defines. The dynamic symbols decide first: a
// file that defines SSL_read or SSL_write there is OpenSSL (libssl); one
// that imports them uses a libssl, attached on its own (ErrNoOpenSSL
// without reading .symtab); one that does neither may link OpenSSL
// statically, with its symbols in .symtab only. Only these few names are
// looked up (elfsym): a large executable costs a few buffers, not its
// whole symbol table.
func opensslOffsets(path string) (map[string]uint64, error) {
	f, err := elfsym.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrNoOpenSSL, err)
	}
	defer f.Close()
	names := make([]string, len(opensslProbes))
	for i, p := range opensslProbes {
		names[i] = p.symbol
	}
	dyn, err := f.Find(elfsym.Dynamic, names)
	if err != nil && !errors.Is(err, elfsym.ErrNoTable) {
		return nil, err
	}
	table := dyn
	if !opensslData(dyn, true) {
		if opensslData(dyn, false) {
			return nil, ErrNoOpenSSL // imports libssl's
		}
		if table, err = f.Find(elfsym.Static, names); err != nil {
			if errors.Is(err, elfsym.ErrNoTable) {
				return nil, ErrNoOpenSSL
			}
			return nil, err
		}
	}
	offs := map[string]uint64{}
	for n, s := range table {
		if s.Defined && s.Type == elf.STT_FUNC && s.Offset != 0 {
			offs[n] = s.Offset
		}
	}
	if !opensslData(table, true) {
		return nil, ErrNoOpenSSL
	}
	return offs, nil
}

// opensslData tells whether syms has SSL_read or SSL_write, defined (or
// imported).
func opensslData(syms map[string]elfsym.Sym, defined bool) bool {
	for _, n := range []string{"SSL_read", "SSL_write"} {
		if s, ok := syms[n]; ok && s.Defined == defined && (!defined || s.Type == elf.STT_FUNC) {
			return true
		}
	}
	return false
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
