package l7

import (
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/table"
)

// SermantName is the sermant feature's name.
const SermantName = "sermant"

var sermantFlavor = flavor{
	name: SermantName, rT: table.SermantL7Rpc, aT: table.SermantL7RpcApi,
	protocols: []l7.Protocol{l7.Dubbo},
}

// NewSermant returns the sermant feature: the Dubbo2 calls of the
// observed processes in sermant_l7_rpc and sermant_l7_rpc_api, from the
// syscall capture (see the package documentation, "sermant"). Its
// sub-items have the l7 feature's names and bits.
func NewSermant(opts ...Option) *Probe { return newFlavor(sermantFlavor, opts) }
