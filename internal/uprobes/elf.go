package uprobes

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/galago-project/galago/internal/elfsym"
)

// ErrNoNote says a file carries no USDT note of the probe asked for.
var ErrNoNote = errors.New("no USDT note")

// fileOffset turns a virtual address of f into its file offset, through
// the loadable segment holding it.
func fileOffset(f *elf.File, addr uint64) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr < p.Vaddr+p.Memsz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no loadable segment", addr)
}

// DefaultSymbols are the file offsets of the functions named, from the
// dynamic symbols: of each name's default version (a libc exports old
// versions of some functions at other addresses, e.g. pthread_cond_wait
// @GLIBC_2.2.5 beside @@GLIBC_2.3.2). Names the file lacks are absent.
// Only the names asked are compared (elfsym), nothing is loaded whole.
func DefaultSymbols(path string, names []string) (map[string]uint64, error) {
	f, err := elfsym.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	offs, err := f.Funcs(names, elfsym.Dynamic)
	if err != nil {
		return nil, fmt.Errorf("%s: dynamic symbols: %w", path, err)
	}
	return offs, nil
}

// USDT is one USDT probe of a file (a .note.stapsdt entry).
type USDT struct {
	Provider, Name string
	// Offset is the probe's file offset, Semaphore its semaphore's (0:
	// none): what a uprobe attaches to.
	Offset, Semaphore uint64
	// Args are the argument specs, as the note gives them (e.g.
	// "-4@%edi", "-8@16(%rsp)").
	Args []string
}

// ReadUSDT reads the USDT probes of an ELF file.
func ReadUSDT(path string) ([]USDT, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseUSDT(f)
}

func parseUSDT(f *elf.File) ([]USDT, error) {
	sec := f.Section(".note.stapsdt")
	if sec == nil {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf(".note.stapsdt: %w", err)
	}
	// A prelinked file moved .stapsdt.base: the notes' addresses move
	// with it.
	var baseSec uint64
	if b := f.Section(".stapsdt.base"); b != nil {
		baseSec = b.Addr
	}
	bo := f.ByteOrder
	addrSize := 8
	if f.Class == elf.ELFCLASS32 {
		addrSize = 4
	}
	word := func(b []byte) uint64 {
		if addrSize == 4 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	var out []USDT
	for len(data) >= 12 {
		nameSz, descSz, typ := bo.Uint32(data), bo.Uint32(data[4:]), bo.Uint32(data[8:])
		nameEnd := 12 + align4(int(nameSz))
		descEnd := nameEnd + align4(int(descSz))
		if nameSz > 1<<16 || descSz > 1<<16 || descEnd > len(data) {
			return out, errors.New(".note.stapsdt: truncated note")
		}
		desc := data[nameEnd : nameEnd+int(descSz)]
		name := string(bytes.TrimRight(data[12:12+nameSz], "\x00"))
		data = data[descEnd:]
		if name != "stapsdt" || typ != 3 || len(desc) < 3*addrSize {
			continue
		}
		pc, base, sem := word(desc), word(desc[addrSize:]), word(desc[2*addrSize:])
		strs := bytes.Split(desc[3*addrSize:], []byte{0})
		if len(strs) < 3 {
			continue
		}
		if baseSec != 0 && base != 0 {
			pc += baseSec - base
			if sem != 0 {
				sem += baseSec - base
			}
		}
		u := USDT{Provider: string(strs[0]), Name: string(strs[1])}
		if args := strings.TrimSpace(string(strs[2])); args != "" {
			u.Args = strings.Fields(args)
		}
		if u.Offset, err = fileOffset(f, pc); err != nil {
			continue
		}
		if sem != 0 {
			if u.Semaphore, err = fileOffset(f, sem); err != nil {
				continue
			}
		}
		out = append(out, u)
	}
	return out, nil
}

func align4(n int) int { return (n + 3) &^ 3 }

// FindUSDT is the probe provider:name of the file.
func FindUSDT(path, provider, name string) (USDT, error) {
	all, err := ReadUSDT(path)
	if err != nil {
		return USDT{}, err
	}
	for _, u := range all {
		if u.Provider == provider && u.Name == name {
			return u, nil
		}
	}
	return USDT{}, fmt.Errorf("%s: %s:%s: %w", path, provider, name, ErrNoNote)
}

// An argument spec packed into a uprobe's cookie, read by the BPF side
// (tprof_usdt_arg in internal/syscap/tprof.bpf.h):
//
//	bits 56..63 kind (ArgConst, ArgReg, ArgDeref), 48..55 size in bytes
//	(bit 55: signed), 32..47 the register's offset in struct pt_regs,
//	0..31 the constant or the dereference's offset (signed).
const (
	ArgConst = 1
	ArgReg   = 2
	ArgDeref = 3
)

// x86Regs are the offsets in x86-64's struct pt_regs of the registers,
// by every name of each register's parts.
var x86Regs = func() map[string]uint16 {
	m := map[string]uint16{}
	for off, names := range [][]string{
		{"r15", "r15d", "r15w", "r15b"}, {"r14", "r14d", "r14w", "r14b"}, {"r13", "r13d", "r13w", "r13b"},
		{"r12", "r12d", "r12w", "r12b"}, {"rbp", "ebp", "bp", "bpl"}, {"rbx", "ebx", "bx", "bl", "bh"},
		{"r11", "r11d", "r11w", "r11b"}, {"r10", "r10d", "r10w", "r10b"}, {"r9", "r9d", "r9w", "r9b"},
		{"r8", "r8d", "r8w", "r8b"}, {"rax", "eax", "ax", "al", "ah"}, {"rcx", "ecx", "cx", "cl", "ch"},
		{"rdx", "edx", "dx", "dl", "dh"}, {"rsi", "esi", "si", "sil"}, {"rdi", "edi", "di", "dil"},
		{}, {"rip", "eip", "ip"}, {}, {}, {"rsp", "esp", "sp", "spl"},
	} {
		for _, n := range names {
			m[n] = uint16(off * 8)
		}
	}
	return m
}()

// arm64Reg is the offset in arm64's struct pt_regs of x0..x30, sp.
func arm64Reg(n string) (uint16, bool) {
	if n == "sp" {
		return 31 * 8, true
	}
	if strings.HasPrefix(n, "x") || strings.HasPrefix(n, "w") {
		if i, err := strconv.Atoi(n[1:]); err == nil && i >= 0 && i <= 30 {
			return uint16(i * 8), true
		}
	}
	return 0, false
}

// ArgCookie packs a USDT argument spec ("-4@%edi", "8@$5", "-4@112(%rsp)",
// arm64 "-4@x0", "8@[sp, 16]") for the machine arch ("amd64", "arm64").
func ArgCookie(spec, arch string) (uint64, error) {
	at := strings.IndexByte(spec, '@')
	if at < 0 {
		return 0, fmt.Errorf("USDT argument %q: no size", spec)
	}
	size, err := strconv.Atoi(spec[:at])
	if err != nil || size == 0 || size < -8 || size > 8 {
		return 0, fmt.Errorf("USDT argument %q: bad size", spec)
	}
	sz := uint64(size)
	if size < 0 {
		sz = uint64(-size) | 0x80
	}
	loc := spec[at+1:]
	reg := func(n string) (uint16, error) {
		var (
			off uint16
			ok  bool
		)
		switch arch {
		case "amd64":
			off, ok = x86Regs[strings.TrimPrefix(n, "%")]
		case "arm64":
			off, ok = arm64Reg(n)
		}
		if !ok {
			return 0, fmt.Errorf("USDT argument %q: register %q unknown on %s", spec, n, arch)
		}
		return off, nil
	}
	pack := func(kind uint64, r uint16, v int64) uint64 {
		return kind<<56 | sz<<48 | uint64(r)<<32 | uint64(uint32(int32(v)))
	}
	switch {
	case strings.HasPrefix(loc, "$"):
		v, err := strconv.ParseInt(loc[1:], 0, 32)
		if err != nil {
			return 0, fmt.Errorf("USDT argument %q: %w", spec, err)
		}
		return pack(ArgConst, 0, v), nil
	case strings.HasSuffix(loc, ")"): // x86: off(%reg)
		open := strings.IndexByte(loc, '(')
		if open < 0 || strings.Contains(loc[open:], ",") {
			return 0, fmt.Errorf("USDT argument %q: unsupported", spec)
		}
		var v int64
		if open > 0 {
			if v, err = strconv.ParseInt(loc[:open], 0, 32); err != nil {
				return 0, fmt.Errorf("USDT argument %q: %w", spec, err)
			}
		}
		r, err := reg(loc[open+1 : len(loc)-1])
		if err != nil {
			return 0, err
		}
		return pack(ArgDeref, r, v), nil
	case strings.HasPrefix(loc, "[") && strings.HasSuffix(loc, "]"): // arm64: [reg, off]
		parts := strings.Split(loc[1:len(loc)-1], ",")
		var v int64
		if len(parts) == 2 {
			if v, err = strconv.ParseInt(strings.TrimSpace(parts[1]), 0, 32); err != nil {
				return 0, fmt.Errorf("USDT argument %q: %w", spec, err)
			}
		}
		r, err := reg(strings.TrimSpace(parts[0]))
		if err != nil {
			return 0, err
		}
		return pack(ArgDeref, r, v), nil
	default:
		r, err := reg(loc)
		if err != nil {
			return 0, err
		}
		return pack(ArgReg, r, 0), nil
	}
}

// LockPrefixed are the names among offs (file offsets of functions)
// whose first byte is x86's lock prefix (0xf0), an instruction a uprobe
// cannot replace.
func LockPrefixed(path string, offs map[string]uint64) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	b := make([]byte, 1)
	for name, off := range offs {
		if _, err := f.ReadAt(b, int64(off)); err != nil {
			return nil, fmt.Errorf("%s: read %s: %w", path, name, err)
		}
		if b[0] == 0xf0 {
			out = append(out, name)
		}
	}
	return out, nil
}
