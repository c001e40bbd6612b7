// Package exetrim gives the agent's own executable pages back to the
// kernel once start-up is over.
//
// galago is one Go binary of ~35 MB whose code, read-only data and
// pc-line table are mapped from the file. The kernel maps them around
// every page touched (fault-around, readahead), so start-up alone (every
// package's init, BTF and BPF object loading, the first probe starts)
// leaves ~24 MB of them resident, counted in the agent's RSS, of which a
// few MB are used afterwards. Trim asks the kernel to reclaim those pages
// (madvise MADV_PAGEOUT on the read-only mappings of the executable,
// Linux 5.4+): they are clean file pages, dropped without I/O, and the
// ones still used come back on their next access. Writable mappings (the
// data and BSS the program changed) are left alone.
//
// Trimmer runs Trim once the agent has been quiet for a while after a
// change (start-up, a probe started or reconfigured), so the pages of
// that change's one-off work go too. On a kernel without MADV_PAGEOUT it
// says so once and stops.
package exetrim
