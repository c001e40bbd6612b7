package symtab

import (
	"debug/elf"
	"debug/gosym"
	"errors"
	"sort"
)

// fileSyms is one file's symbol table.
type fileSyms struct {
	loads []elf.ProgHeader // PT_LOAD segments
	addrs []uint64         // function starts, sorted
	ends  []uint64         // function ends (start+size; start of the next when size is 0)
	names []string
	gotab *gosym.Table // Go binaries: the pclntab, preferred
}

// loadFile reads the symbols of an ELF file.
func loadFile(name string) (*fileSyms, error) {
	f, err := elf.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fs := &fileSyms{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			fs.loads = append(fs.loads, p.ProgHeader)
		}
	}
	if len(fs.loads) == 0 {
		return nil, errors.New("symtab: no loadable segment")
	}
	fs.gotab = goTable(f)

	type sym struct {
		addr, size uint64
		name       string
	}
	var syms []sym
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		ss, err := read()
		if err != nil {
			continue // ErrNoSymbols: stripped
		}
		for _, s := range ss {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Section == elf.SHN_UNDEF {
				continue
			}
			syms = append(syms, sym{s.Value, s.Size, s.Name})
		}
	}
	// Sorted by address; among aliases at one address the first read
	// (.symtab before .dynsym) wins.
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	for i, s := range syms {
		if i > 0 && s.addr == syms[i-1].addr {
			continue
		}
		end := s.addr + s.size
		if s.size == 0 {
			end = ^uint64(0)
			if i+1 < len(syms) {
				end = syms[i+1].addr
			}
		}
		fs.addrs = append(fs.addrs, s.addr)
		fs.ends = append(fs.ends, end)
		fs.names = append(fs.names, s.name)
	}
	if fs.gotab == nil && len(fs.addrs) == 0 {
		return nil, errors.New("symtab: no symbols")
	}
	return fs, nil
}

// goTable returns the pclntab of a Go binary, or nil.
func goTable(f *elf.File) *gosym.Table {
	pcln := f.Section(".gopclntab")
	text := f.Section(".text")
	if pcln == nil || text == nil {
		return nil
	}
	data, err := pcln.Data()
	if err != nil {
		return nil
	}
	t, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil
	}
	return t
}

// fileOffsetToVaddr maps a file offset into the ELF virtual address the
// linker assigned it.
func (fs *fileSyms) fileOffsetToVaddr(off uint64) (uint64, bool) {
	for _, p := range fs.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// lookup names the function holding vaddr; "" when none does.
func (fs *fileSyms) lookup(vaddr uint64) string {
	if fs.gotab != nil {
		if fn := fs.gotab.PCToFunc(vaddr); fn != nil {
			return fn.Name
		}
	}
	i := sort.Search(len(fs.addrs), func(i int) bool { return fs.addrs[i] > vaddr })
	if i == 0 || vaddr >= fs.ends[i-1] {
		return ""
	}
	return fs.names[i-1]
}
