package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrNotGo says a file has no Go build information (.go.buildinfo):
// not a Go program, or one too old (before Go 1.13) to matter here.
var ErrNotGo = errors.New("not a Go executable")

// GoVersion is the Go version the executable was built with ("go1.22.3"),
// from the header of its .go.buildinfo section: inline since Go 1.18,
// through pointers to a string before.
func (f *File) GoVersion() (string, error) {
	sec := f.elf.Section(".go.buildinfo")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return "", ErrNotGo
	}
	var hdr [32]byte
	if _, err := sec.ReadAt(hdr[:], 0); err != nil {
		return "", fmt.Errorf(".go.buildinfo: %w", err)
	}
	if !bytes.HasPrefix(hdr[:], []byte("\xff Go buildinf:")) {
		return "", fmt.Errorf("%w: .go.buildinfo has no Go build information header", ErrNotGo)
	}
	ptrSize, flags := int(hdr[14]), hdr[15]
	var bo binary.ByteOrder = binary.LittleEndian
	if flags&1 != 0 {
		bo = binary.BigEndian
	}
	if flags&2 != 0 { // Go 1.18+: varint length, then the version
		var b [80]byte
		n, _ := sec.ReadAt(b[:], 32)
		l, k := binary.Uvarint(b[:n])
		if k <= 0 || l == 0 || int(l) > n-k {
			return "", errors.New(".go.buildinfo: bad version string")
		}
		return string(b[k : k+int(l)]), nil
	}
	if ptrSize != 4 && ptrSize != 8 {
		return "", fmt.Errorf(".go.buildinfo: pointer size %d", ptrSize)
	}
	ptr := func(b []byte) uint64 {
		if ptrSize == 4 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	// versPtr -> a Go string header (data, len) -> the bytes.
	var sh [16]byte
	if err := f.readVirt(sh[:2*ptrSize], ptr(hdr[16:])); err != nil {
		return "", fmt.Errorf(".go.buildinfo version: %w", err)
	}
	data, l := ptr(sh[:]), ptr(sh[ptrSize:])
	if l == 0 || l > 64 {
		return "", fmt.Errorf(".go.buildinfo: version string of %d bytes", l)
	}
	v := make([]byte, l)
	if err := f.readVirt(v, data); err != nil {
		return "", fmt.Errorf(".go.buildinfo version: %w", err)
	}
	return string(v), nil
}

// readVirt reads len(b) bytes at virtual address addr, from the loadable
// segment holding them.
func (f *File) readVirt(b []byte, addr uint64) error {
	for _, p := range f.elf.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr+uint64(len(b)) <= p.Vaddr+p.Filesz {
			_, err := p.ReadAt(b, int64(addr-p.Vaddr))
			return err
		}
	}
	return fmt.Errorf("address %#x is in no loadable segment", addr)
}

// pclntab magic numbers by Go version (little-endian reading).
const (
	pcln116 = 0xfffffffa // Go 1.16-1.17
	pcln118 = 0xfffffff0 // Go 1.18-1.19
	pcln120 = 0xfffffff1 // Go 1.20+
)

// GoFuncs returns the [entry, end) virtual addresses of the functions
// named in want, from .gopclntab's function table (present in stripped
// Go executables too): the table is walked entry by entry (entry PC and
// the offset of its func record, whose name offset points into the
// function name table), comparing each name in place; a function ends
// where the next one starts. Go 1.16 and later tables only.
func (f *File) GoFuncs(want []string) (map[string][2]uint64, error) {
	pcln := f.elf.Section(".gopclntab")
	text := f.elf.Section(".text")
	if pcln == nil || text == nil || pcln.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("%w: no .gopclntab", ErrNotGo)
	}
	var hdr [8 + 8*8]byte
	n, err := pcln.ReadAt(hdr[:], 0)
	if n < 8 {
		return nil, fmt.Errorf(".gopclntab header: %w", err)
	}
	var bo binary.ByteOrder
	magic := binary.LittleEndian.Uint32(hdr[:])
	switch magic {
	case pcln116, pcln118, pcln120:
		bo = binary.LittleEndian
	default:
		magic = binary.BigEndian.Uint32(hdr[:])
		if magic != pcln116 && magic != pcln118 && magic != pcln120 {
			return nil, fmt.Errorf(".gopclntab: magic %#x: not a Go 1.16+ table", binary.LittleEndian.Uint32(hdr[:]))
		}
		bo = binary.BigEndian
	}
	ptrSize := int(hdr[7])
	if ptrSize != 4 && ptrSize != 8 {
		return nil, fmt.Errorf(".gopclntab: pointer size %d", ptrSize)
	}
	if n < 8+8*ptrSize {
		return nil, fmt.Errorf(".gopclntab header: %w", err)
	}
	word := func(i int) uint64 {
		b := hdr[8+i*ptrSize:]
		if ptrSize == 4 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	// Header words: nfunctab, nfiletab, [textStart (1.18+)], funcnametab,
	// cutab, filetab, pctab, funcdata (= functab) offsets.
	nfunc := word(0)
	nameTab, funcData := word(2), word(6)
	fieldSize := ptrSize // functab field: PC (1.16) or entry offset (1.18+)
	textStart := uint64(0)
	if magic != pcln116 {
		nameTab, funcData = word(3), word(7)
		fieldSize = 4
		// The header's own text start may be unrelocated: .text's address is
		// runtime.text (what debug/gosym uses too).
		textStart = text.Addr
	}
	size := int64(pcln.Size)
	if nameTab >= uint64(size) || funcData >= uint64(size) || nfunc > uint64(size) {
		return nil, errors.New(".gopclntab: header out of bounds")
	}
	field := func(b []byte) uint64 {
		if fieldSize == 4 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	base := int64(pcln.Offset)
	tab, recs, strs := &f.w[0], &f.w[1], &f.w[2]
	tab.reset(f.f, base+int64(funcData), size-int64(funcData))
	recs.reset(f.f, base+int64(funcData), size-int64(funcData))
	strs.reset(f.f, base+int64(nameTab), size-int64(nameTab))
	nm := newNames(want)
	out := map[string][2]uint64{}
	ent := int64(2 * fieldSize)
	for i := int64(0); i < int64(nfunc) && len(out) < len(want); i++ {
		// functab[i] = (pc, funcoff), functab[i+1].pc is where it ends.
		e, err := tab.bytes(i*ent, int(ent)+fieldSize)
		if err != nil || len(e) < int(ent)+fieldSize {
			return nil, fmt.Errorf(".gopclntab: function table entry %d: truncated", i)
		}
		entry, off, end := field(e), field(e[fieldSize:]), field(e[ent:])
		// The func record: entry (PC, or a 4-byte offset since 1.18),
		// then the name's offset in the function name table.
		nameAt := int64(off) + int64(fieldSize)
		r, err := recs.bytes(nameAt, 4)
		if err != nil || len(r) < 4 {
			return nil, fmt.Errorf(".gopclntab: func record %d: truncated", i)
		}
		k, err := nm.matchAt(strs, int64(bo.Uint32(r)))
		if err != nil {
			return nil, fmt.Errorf(".gopclntab names: %w", err)
		}
		if k < 0 {
			continue
		}
		if _, dup := out[nm.list[k]]; !dup && end > entry {
			out[nm.list[k]] = [2]uint64{entry + textStart, end + textStart}
		}
	}
	return out, nil
}
