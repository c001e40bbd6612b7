package syscap

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt"
)

// SSLFDs is how many SSL objects' sockets ssl_fds remembers (an LRU hash,
// always preallocated: 96 bytes an entry). An entry serves only the TLS
// calls OpenSSL answers from its buffer without a syscall; every other
// call names its socket afresh. An evicted entry that such a call needed
// makes the call count in ssl_lost (l7's and the other consumers' events
// lost). 16384 live TLS sessions in observed processes before the least
// recently used one is forgotten; the object's 65536 cost 6 MiB.
const SSLFDs = 16384

// loadSpec is the capture's collection spec with galago's map sizing:
// the filter maps allocate on insert (user space writes them; fork and
// exec only under a whitelist that follows processes) and ssl_fds holds
// SSLFDs entries. Every loader of the object (Open, OpenStats, OpenTprof)
// starts from it.
func loadSpec() (*ebpf.CollectionSpec, error) {
	spec, err := loadSyscap()
	if err != nil {
		return nil, err
	}
	if err := bpfrt.AllocOnInsert(spec, bpfrt.FilterMaps...); err != nil {
		return nil, fmt.Errorf("syscap: %w", err)
	}
	m, ok := spec.Maps["ssl_fds"]
	if !ok {
		return nil, fmt.Errorf("syscap: map ssl_fds not in spec")
	}
	m.MaxEntries = SSLFDs
	return spec, nil
}
