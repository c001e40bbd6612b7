package symtab

import (
	"bufio"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Kallsyms is the kernel's text symbol table.
type Kallsyms struct {
	addrs []uint64
	names []string
}

// ReadKallsyms reads a kallsyms file (needs root for real addresses).
func ReadKallsyms(name string) (*Kallsyms, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseKallsyms(f)
}

// ParseKallsyms reads text symbols ("t"/"T") of kallsyms; module symbols
// keep their "[module]" suffix out and are named plainly.
func ParseKallsyms(r io.Reader) (*Kallsyms, error) {
	type sym struct {
		addr uint64
		name string
	}
	var syms []sym
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || (f[1] != "t" && f[1] != "T") {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil || a == 0 {
			continue // hidden addresses (kptr_restrict) name nothing
		}
		syms = append(syms, sym{a, f[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	k := &Kallsyms{addrs: make([]uint64, len(syms)), names: make([]string, len(syms))}
	for i, s := range syms {
		k.addrs[i], k.names[i] = s.addr, s.name
	}
	return k, nil
}

// Lookup names the symbol at or before pc; Unknown below the first.
func (k *Kallsyms) Lookup(pc uint64) string {
	i := sort.Search(len(k.addrs), func(i int) bool { return k.addrs[i] > pc })
	if i == 0 {
		return Unknown
	}
	return k.names[i-1]
}

// Len is the number of symbols.
func (k *Kallsyms) Len() int { return len(k.addrs) }
