package syscap

import (
	"debug/elf"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/galago-project/galago/internal/elfsym"
	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// ErrNotGoTLS says an executable is not a Go program that uses
// crypto/tls, or one galago cannot probe (a Go older than 1.17, whose
// calling convention passes arguments on the stack).
var ErrNotGoTLS = errors.New("not a Go 1.17+ program with crypto/tls")

// goFunc is a function of a Go executable: where its code is in the file,
// and the file offsets of its RET instructions.
type goFunc struct {
	name string
	// offset is the file offset of the entry probe: the first instruction
	// after the stack-check prologue (bodyOffset).
	offset uint64
	rets   []uint64 // file offsets of every RET
}

// goTLSFuncs are the functions probed in Go programs.
var goTLSFuncs = []string{"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"}

// goTLSProbes finds crypto/tls.(*Conn).Write and Read in the Go
// executable f: from its symbol table, or from .gopclntab's function
// table when the binary is stripped (elfsym: only these names are
// compared, nothing is loaded whole); and their RET instructions by
// disassembly. A file without Go build information is not looked at
// further.
func goTLSProbes(f *elfsym.File) ([]goFunc, error) {
	v, err := f.GoVersion()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotGoTLS, err)
	}
	if !goAtLeast(v, 1, 17) {
		return nil, fmt.Errorf("%w: %s", ErrNotGoTLS, v)
	}
	var arch string
	switch f.ELF().Machine {
	case elf.EM_X86_64:
		arch = "amd64"
	case elf.EM_AARCH64:
		arch = "arm64"
	default:
		return nil, fmt.Errorf("%w: machine %s", ErrNotGoTLS, f.ELF().Machine)
	}
	bounds, err := goFuncBounds(f, goTLSFuncs)
	if err != nil {
		return nil, err
	}
	var out []goFunc
	for _, name := range goTLSFuncs {
		b, ok := bounds[name]
		if !ok {
			return nil, ErrNotGoTLS
		}
		off, code, err := codeAt(f.ELF(), b[0], b[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rets, err := retOffsets(arch, code)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(rets) == 0 {
			return nil, fmt.Errorf("%s: no RET found", name)
		}
		fn := goFunc{name: name, offset: off + bodyOffset(arch, code)}
		for _, r := range rets {
			fn.rets = append(fn.rets, off+r)
		}
		out = append(out, fn)
	}
	return out, nil
}

// goAtLeast reports whether a Go version ("go1.21.3", "go1.26rc1",
// "devel ...") is at least major.minor; devel builds count as new.
func goAtLeast(v string, major, minor int) bool {
	if strings.HasPrefix(v, "devel") {
		return true
	}
	v = strings.TrimPrefix(v, "go")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	mn := parts[1]
	if i := strings.IndexFunc(mn, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		mn = mn[:i]
	}
	min, err2 := strconv.Atoi(mn)
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || (maj == major && min >= minor)
}

// goFuncBounds returns [entry, end) virtual addresses of the named
// functions: from .symtab if present (exact sizes), else from
// .gopclntab (a function ends where the next begins).
func goFuncBounds(f *elfsym.File, names []string) (map[string][2]uint64, error) {
	syms, err := f.Find(elfsym.Static, names)
	if err != nil && !errors.Is(err, elfsym.ErrNoTable) {
		return nil, err
	}
	out := map[string][2]uint64{}
	for n, s := range syms {
		if s.Defined && s.Size > 0 && s.Type == elf.STT_FUNC {
			out[n] = [2]uint64{s.Value, s.Value + s.Size}
		}
	}
	if len(out) == len(names) {
		return out, nil
	}
	fns, err := f.GoFuncs(names)
	if errors.Is(err, elfsym.ErrNotGo) {
		return out, nil
	}
	return fns, err
}

// codeAt returns the file offset of virtual address start and the bytes
// of [start, end), from the executable PT_LOAD segment holding them.
func codeAt(f *elf.File, start, end uint64) (uint64, []byte, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		if start >= p.Vaddr && end <= p.Vaddr+p.Filesz {
			off := start - p.Vaddr + p.Off
			b := make([]byte, end-start)
			if _, err := p.ReadAt(b, int64(start-p.Vaddr)); err != nil {
				return 0, nil, err
			}
			return off, b, nil
		}
	}
	return 0, nil, fmt.Errorf("address %#x not in an executable segment", start)
}

// bodyOffset returns the offset in a Go function's code of the first
// instruction after its stack-check prologue: the compare of the stack
// pointer with g's stackguard0 (16 bytes into the g, which is R14 on
// amd64 and R28 on arm64) and the branch to the morestack call; 0 when
// the code starts with no such prologue (a NOSPLIT function). A uprobe
// at the entry fires twice for some calls: when the prologue finds the
// stack too small, or a preemption request set stackguard0, the function
// calls morestack and starts again from its entry; from the body's first
// instruction on, a call runs once, with its arguments still in their
// registers (the prologue only uses scratch registers).
func bodyOffset(arch string, code []byte) uint64 {
	const maxPrologue = 8 // instructions
	guard := false        // the stackguard0 compare (amd64) or load (arm64) was seen
	switch arch {
	case "amd64":
		for off, n := 0, 0; off < len(code) && n < maxPrologue; n++ {
			inst, err := x86asm.Decode(code[off:], 64)
			if err != nil || inst.Len == 0 {
				return 0
			}
			off += inst.Len
			if guard {
				if isJcc(inst.Op) {
					return uint64(off)
				}
				return 0
			}
			if inst.Op == x86asm.CMP {
				for _, a := range inst.Args {
					if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.R14 && m.Index == 0 && m.Disp == 16 {
						guard = true
					}
				}
			}
		}
	case "arm64":
		for off := 0; off+4 <= len(code) && off < 4*maxPrologue; off += 4 {
			inst, err := arm64asm.Decode(code[off : off+4])
			if err != nil {
				return 0
			}
			if !guard {
				guard = inst.Op == arm64asm.LDR && inst.Args[1] != nil && inst.Args[1].String() == "[X28,#16]"
				continue
			}
			if _, cond := inst.Args[0].(arm64asm.Cond); inst.Op == arm64asm.B && cond {
				return uint64(off + 4)
			}
		}
	}
	return 0
}

// isJcc reports whether op is a conditional jump.
func isJcc(op x86asm.Op) bool {
	switch op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE, x86asm.JL,
		x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JS:
		return true
	}
	return false
}

// retOffsets returns the offsets of the RET instructions in code.
func retOffsets(arch string, code []byte) ([]uint64, error) {
	var out []uint64
	switch arch {
	case "amd64":
		for off := 0; off < len(code); {
			inst, err := x86asm.Decode(code[off:], 64)
			if err != nil || inst.Len == 0 {
				// Padding or data between functions: skip a byte.
				off++
				continue
			}
			if inst.Op == x86asm.RET {
				out = append(out, uint64(off))
			}
			off += inst.Len
		}
	case "arm64":
		for off := 0; off+4 <= len(code); off += 4 {
			inst, err := arm64asm.Decode(code[off : off+4])
			if err == nil && inst.Op == arm64asm.RET {
				out = append(out, uint64(off))
			}
		}
	default:
		return nil, fmt.Errorf("architecture %s", arch)
	}
	return out, nil
}

// AttachGoTLS attaches the Go TLS uprobes to the Go executable at path:
// crypto/tls.(*Conn).Write and Read after their stack-check prologue
// (bodyOffset; once per call) and at every RET. A file
// already attached (same inode) is not attached again (attached false).
// ErrNotGoTLS says there is nothing to attach.
func (c *Capture) AttachGoTLS(path string) (attached bool, err error) {
	id, err := fileIDOf(path)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, done := c.goFiles[id]; done {
		return false, nil
	}
	f, err := elfsym.Open(path)
	if err != nil {
		c.goFiles[id] = nil
		return false, fmt.Errorf("%w: %w", ErrNotGoTLS, err)
	}
	funcs, err := goTLSProbes(f)
	f.Close()
	if err != nil {
		c.goFiles[id] = nil
		return false, err
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return false, err
	}
	var links []link.Link
	attach := func(prog *ebpf.Program, name string, off uint64) error {
		l, err := ex.Uprobe(name, prog, &link.UprobeOptions{Address: off})
		if err != nil {
			return fmt.Errorf("uprobe %s+%#x in %s: %w", name, off, path, err)
		}
		links = append(links, l)
		return nil
	}
	for _, fn := range funcs {
		enter, rets := c.objs.GoTlsReadEnter, fn.rets
		if strings.HasSuffix(fn.name, ".Write") {
			// A Write's plaintext is sent at entry: no return probes.
			enter, rets = c.objs.GoTlsWriteEnter, nil
		}
		if err := attach(enter, fn.name, fn.offset); err != nil {
			closeAll(links)
			return false, err
		}
		for _, r := range rets {
			if err := attach(c.objs.GoTlsReturn, fn.name, r); err != nil {
				closeAll(links)
				return false, err
			}
		}
	}
	c.goFiles[id] = links
	return true, nil
}
