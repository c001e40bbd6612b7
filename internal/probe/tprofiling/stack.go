package tprofiling

import (
	"strings"

	"github.com/galago-project/galago/internal/symtab"
	"github.com/galago-project/galago/internal/syscap"
)

// stackNames makes func.stack from the kernel's stack ids with the
// symbolizer flamegraph uses (internal/symtab: ELF symbols, .gopclntab,
// through /proc/<pid>/root). An id names one stack for the load's life
// (syscap.Tprof.Stack), so its addresses are read once; the names are
// cached per process and id (until the id is pruned: forget), and each
// process's mappings are re-read once per report for the stacks new to
// it. Run loop only.
type stackNames struct {
	read     func(id int32, pcs *[syscap.TprofStackDepth]uint64) ([]uint64, error)
	procRoot string
	syms     *symtab.Resolver
	known    map[uint32]bool // processes whose mappings syms holds
	pcs      map[int32][]uint64
	names    map[stackKey]string
	fresh    map[uint32]bool // processes whose mappings were read this report
	buf      [syscap.TprofStackDepth]uint64
}

type stackKey struct {
	tgid uint32
	id   int32
}

func newStackNames(procRoot string, read func(int32, *[syscap.TprofStackDepth]uint64) ([]uint64, error)) *stackNames {
	return &stackNames{read: read, procRoot: procRoot, syms: symtab.NewResolver(procRoot), known: map[uint32]bool{},
		pcs: map[int32][]uint64{}, names: map[stackKey]string{}, fresh: map[uint32]bool{}}
}

// forget drops what the cache holds of ids (removed from the kernel's
// map, which gives them to other stacks next).
func (s *stackNames) forget(ids []int32) {
	if len(ids) == 0 {
		return
	}
	gone := make(map[int32]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
		delete(s.pcs, id)
	}
	for k := range s.names {
		if gone[k.id] {
			delete(s.names, k)
		}
	}
}

// newReport starts a report: mappings are re-read for the stacks it names.
func (s *stackNames) newReport() { clear(s.fresh) }

// name sets e.Stack from e.StackID; false when the id is no longer in the
// kernel's map (the caller counts it lost).
func (s *stackNames) name(e *Event) bool {
	if e.StackID < 0 {
		return true
	}
	k := stackKey{e.TGID, e.StackID}
	if n, ok := s.names[k]; ok {
		e.Stack = n
		return true
	}
	pcs, ok := s.pcs[e.StackID]
	if !ok {
		got, err := s.read(e.StackID, &s.buf)
		if err != nil {
			return false
		}
		pcs = append([]uint64(nil), got...)
		if len(s.pcs) >= maxCache {
			clear(s.pcs)
		}
		s.pcs[e.StackID] = pcs
	}
	pid := int(e.TGID)
	if !s.fresh[e.TGID] {
		if !s.known[e.TGID] && len(s.known) >= maxCache {
			// Bound the mappings and files held: start afresh.
			s.syms = symtab.NewResolver(s.procRoot)
			clear(s.known)
		}
		s.known[e.TGID] = true
		s.fresh[e.TGID] = true
		_ = s.syms.Refresh(pid) // gone: its last mappings serve
	}
	var b strings.Builder
	for i := len(pcs) - 1; i >= 0; i-- {
		// Every address is a return address or, at the leaf, the one
		// after the syscall instruction: name the instruction before.
		b.WriteString(frameName(s.syms.User(pid, pcs[i]-1)))
		b.WriteByte(';')
	}
	if len(s.names) >= maxCache {
		clear(s.names)
	}
	s.names[k] = b.String()
	e.Stack = s.names[k]
	return true
}

// frameName keeps a frame from breaking the ";"-joined stack.
func frameName(n string) string { return strings.ReplaceAll(n, ";", ":") }
