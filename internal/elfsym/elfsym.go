// Package elfsym finds a few named symbols in an ELF file without loading
// its symbol tables: the .dynsym/.symtab entries stream through a fixed
// buffer and their names are compared in place in .dynstr/.strtab against
// the names asked for, so a large Go executable (hundreds of thousands of
// symbols) costs a few fixed buffers, not a string and a map entry per
// symbol. For Go executables it also reads the Go version from
// .go.buildinfo and finds functions by name in .gopclntab's function
// table (stripped binaries), walked entry by entry the same way.
//
// It is what the uprobe users (TLS, DNS, nginx, libc probes) resolve
// their functions with; passing the file offset it returns as
// link.UprobeOptions.Address keeps cilium/ebpf from loading every symbol
// of the file itself.
//
// Limits: little- and big-endian ELF32/ELF64 headers are read by
// debug/elf; symbol tables of ELF64 and ELF32 are both streamed.
// Compressed symbol tables are not read (no linker writes them).
package elfsym

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// ErrNoTable says a file has no symbol table of the kind asked for.
var ErrNoTable = errors.New("no such symbol table")

// Table is the symbol table to search.
type Table int

const (
	// Dynamic is .dynsym: what a shared object exports and imports.
	Dynamic Table = iota
	// Static is .symtab: every symbol of the link (absent when stripped).
	Static
)

func (t Table) String() string {
	if t == Dynamic {
		return ".dynsym"
	}
	return ".symtab"
}

// Sym is one symbol found.
type Sym struct {
	// Value and Size are the symbol's virtual address and size.
	Value, Size uint64
	// Offset is Value's file offset, through the executable loadable
	// segment holding it (0 when none does): what a uprobe attaches to.
	Offset uint64
	Type   elf.SymType
	// Defined is false for an import (section index SHN_UNDEF).
	Defined bool
	// Hidden says a .dynsym entry is a non-default version of its name
	// (.gnu.version; a libc keeps old versions of some functions beside
	// the default one).
	Hidden bool
}

// better tells whether s should replace o as a name's answer: a
// definition over an import, the default version over a hidden one, a
// function over anything else; else the first one found stays.
func (s Sym) better(o Sym) bool {
	if s.Defined != o.Defined {
		return s.Defined
	}
	if s.Hidden != o.Hidden {
		return !s.Hidden
	}
	return s.Type == elf.STT_FUNC && o.Type != elf.STT_FUNC
}

// bufSize is each window's buffer: a few pages, so a table is read in
// few system calls.
const bufSize = 16 << 10

// File is an ELF file open for symbol look-ups.
type File struct {
	f     io.ReaderAt
	close func() error
	elf   *elf.File
	// One window per stream read at once (symbols and their names, or
	// pclntab's function table, func records and names).
	w [3]window
}

// Open opens the ELF file at path (its headers only).
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	e, err := NewFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	e.close = f.Close
	return e, nil
}

// NewFile reads the ELF headers of r, for look-ups in it.
func NewFile(r io.ReaderAt) (*File, error) {
	e, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	return &File{f: r, elf: e}, nil
}

// Close closes the file (opened by Open).
func (f *File) Close() error {
	for i := range f.w {
		if b := f.w[i].store; b != nil {
			bufs.Put(&b)
			f.w[i] = window{}
		}
	}
	if f.close == nil {
		return nil
	}
	return f.close()
}

// bufs are the windows' buffers, reused from file to file (a scan looks
// at many files in a row).
var bufs = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// ELF is the file's headers (sections and segments), for reading a few
// bytes of code or data.
func (f *File) ELF() *elf.File { return f.elf }

// window is a fixed buffer over part of the file [lo, hi): bytes(off, n)
// returns up to n bytes at off, read again only when off leaves what the
// buffer holds.
type window struct {
	r      io.ReaderAt
	lo, hi int64  // the section's bounds in the file
	at     int64  // file offset of buf[0]
	buf    []byte // what was read
	store  []byte // the buffer, allocated once
}

func (w *window) reset(r io.ReaderAt, lo, size int64) {
	if w.store == nil {
		w.store = *bufs.Get().(*[]byte)
	}
	w.r, w.lo, w.hi, w.at, w.buf = r, lo, lo+size, 0, nil
}

// bytes returns the section's bytes [off, off+n), relative to the
// section, shorter at its end; nil when off is outside it.
func (w *window) bytes(off int64, n int) ([]byte, error) {
	pos := w.lo + off
	if off < 0 || pos >= w.hi {
		return nil, nil
	}
	if n > len(w.store) {
		n = len(w.store)
	}
	end := min(pos+int64(n), w.hi)
	if pos < w.at || end > w.at+int64(len(w.buf)) {
		m := min(int64(len(w.store)), w.hi-pos)
		k, err := w.r.ReadAt(w.store[:m], pos)
		if k < int(end-pos) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		w.at, w.buf = pos, w.store[:k]
	}
	return w.buf[pos-w.at : end-w.at], nil
}

// names is the set of names looked for: matchAt compares the name at a
// string table offset with each, in place.
type names struct {
	list   []string
	maxLen int
	first  [256]bool
}

func newNames(list []string) *names {
	n := &names{list: list}
	for _, s := range list {
		n.maxLen = max(n.maxLen, len(s))
		if s != "" {
			n.first[s[0]] = true
		}
	}
	return n
}

// match returns the index of the name the NUL-terminated bytes b start
// with, -1 for none.
func (n *names) match(b []byte) int {
	if len(b) == 0 || !n.first[b[0]] {
		return -1
	}
	for i, s := range n.list {
		if len(b) > len(s) && b[len(s)] == 0 && string(b[:len(s)]) == s {
			return i
		}
	}
	return -1
}

// matchAt reads the name at off of the string table window w.
func (n *names) matchAt(w *window, off int64) (int, error) {
	b, err := w.bytes(off, n.maxLen+1)
	if err != nil {
		return -1, err
	}
	return n.match(b), nil
}

// Find returns the symbols of table named in want (each name's best
// entry: a definition, of the default version, a function), by name;
// names the table lacks are absent. A file without the table gives
// ErrNoTable.
func (f *File) Find(table Table, want []string) (map[string]Sym, error) {
	typ, name := elf.SHT_DYNSYM, ".dynsym"
	if table == Static {
		typ, name = elf.SHT_SYMTAB, ".symtab"
	}
	var sec *elf.Section
	for _, s := range f.elf.Sections {
		if s.Type == typ {
			sec = s
			break
		}
	}
	if sec == nil || sec.Link == 0 || int(sec.Link) >= len(f.elf.Sections) {
		return nil, fmt.Errorf("%s: %w", name, ErrNoTable)
	}
	if sec.Flags&elf.SHF_COMPRESSED != 0 {
		return nil, fmt.Errorf("%s: compressed", name)
	}
	strs := f.elf.Sections[sec.Link]
	var versym *elf.Section
	if table == Dynamic {
		versym = f.elf.SectionByType(elf.SHT_GNU_VERSYM)
	}
	entSize := 24
	if f.elf.Class == elf.ELFCLASS32 {
		entSize = 16
	}
	bo := f.elf.ByteOrder
	nm := newNames(want)
	out := map[string]Sym{}
	syms, str := &f.w[0], &f.w[1]
	syms.reset(f.f, int64(sec.Offset), int64(sec.Size))
	str.reset(f.f, int64(strs.Offset), int64(strs.Size))
	n := int64(sec.Size) / int64(entSize)
	for i := int64(1); i < n; i++ { // entry 0 is the null symbol
		e, err := syms.bytes(i*int64(entSize), entSize)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(e) < entSize {
			break
		}
		k, err := nm.matchAt(str, int64(bo.Uint32(e)))
		if err != nil {
			return nil, fmt.Errorf("%s names: %w", strs.Name, err)
		}
		if k < 0 {
			continue
		}
		var s Sym
		var info uint8
		var shndx uint16
		if entSize == 24 {
			info, shndx = e[4], bo.Uint16(e[6:])
			s.Value, s.Size = bo.Uint64(e[8:]), bo.Uint64(e[16:])
		} else {
			s.Value, s.Size = uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))
			info, shndx = e[12], bo.Uint16(e[14:])
		}
		s.Type = elf.ST_TYPE(info)
		s.Defined = elf.SectionIndex(shndx) != elf.SHN_UNDEF
		if versym != nil {
			s.Hidden = f.hidden(versym, bo, i)
		}
		if s.Defined {
			s.Offset = f.fileOffset(s.Value)
		}
		if old, ok := out[nm.list[k]]; !ok || s.better(old) {
			out[nm.list[k]] = s
		}
	}
	return out, nil
}

// hidden reads symbol i's .gnu.version entry: bit 15 marks a version
// that is not the name's default.
func (f *File) hidden(versym *elf.Section, bo binary.ByteOrder, i int64) bool {
	var b [2]byte
	if _, err := f.f.ReadAt(b[:], int64(versym.Offset)+2*i); err != nil {
		return false
	}
	return bo.Uint16(b[:])&0x8000 != 0
}

// fileOffset is the file offset of the virtual address addr, through the
// executable loadable segment holding it (else any loadable one); 0 if
// none does.
func (f *File) fileOffset(addr uint64) uint64 {
	var any uint64
	for _, p := range f.elf.Progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr >= p.Vaddr+p.Memsz {
			continue
		}
		if p.Flags&elf.PF_X != 0 {
			return addr - p.Vaddr + p.Off
		}
		if any == 0 {
			any = addr - p.Vaddr + p.Off
		}
	}
	return any
}

// FileOffset is the file offset of the virtual address addr (0: in no
// loadable segment).
func (f *File) FileOffset(addr uint64) uint64 { return f.fileOffset(addr) }

// Funcs returns the file offsets of the functions named in want that
// the file defines, from the tables given in order (a name found in one
// is not looked for in the next); missing tables are skipped, and
// ErrNoTable says the file has none of them.
func (f *File) Funcs(want []string, tables ...Table) (map[string]uint64, error) {
	out := map[string]uint64{}
	left := want
	found := false
	for _, t := range tables {
		if len(left) == 0 {
			break
		}
		syms, err := f.Find(t, left)
		if errors.Is(err, ErrNoTable) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		var rest []string
		for _, n := range left {
			if s, ok := syms[n]; ok && s.Defined && s.Type == elf.STT_FUNC && s.Value != 0 && s.Offset != 0 {
				out[n] = s.Offset
			} else {
				rest = append(rest, n)
			}
		}
		left = rest
	}
	if !found && len(want) > 0 {
		return nil, fmt.Errorf("%v: %w", tables, ErrNoTable)
	}
	return out, nil
}

// Funcs opens the file at path and returns the file offsets of the
// functions named that it defines, from the tables given in order.
func Funcs(path string, want []string, tables ...Table) (map[string]uint64, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Funcs(want, tables...)
}
