package container

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/table"
)

//go:embed proc_oom.meta
var procOomMeta []byte

// ProcOom is galago's proc_oom table, declared next to its probe from a
// .meta file like gala-gopher's.
var ProcOom = func() *table.Table {
	ts, err := table.ParseMeta("proc_oom.meta", procOomMeta)
	if err != nil || len(ts) != 1 {
		panic(fmt.Sprintf("container: proc_oom.meta: %v (%d tables)", err, len(ts)))
	}
	return ts[0]
}()

var (
	oomTgid      = ProcOom.MustIndex("tgid")
	oomComm      = ProcOom.MustIndex("comm")
	oomContainer = ProcOom.MustIndex("container_id")
	oomKills     = ProcOom.MustIndex("oom_kills")
)

// maxVictimsPerPeriod bounds the victims kept for one period's proc_oom
// rows; more are counted as lost events.
const maxVictimsPerPeriod = 1024

// victim is one OOM kill of an observed process.
type victim struct {
	tgid        uint32
	comm        string
	containerID string // short id
	kills       int
}

func decodeVictim(raw []byte) (oomOomVictim, error) {
	var v oomOomVictim
	if len(raw) < binary.Size(v) {
		return v, fmt.Errorf("oom_victim record of %d bytes, want %d", len(raw), binary.Size(v))
	}
	err := binary.Read(bytes.NewReader(raw), binary.NativeEndian, &v)
	return v, err
}

// handleVictim takes one record of the victims ring: a kill of an
// observed process (selected by the snoopers, or in a container reported
// last period) becomes part of this period's proc_oom rows and, with
// report_event=1, an abnormal event at once.
func (p *Probe) handleVictim(raw []byte) error {
	v, err := decodeVictim(raw)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.rt == nil {
		return nil
	}
	cid, inContainer := p.victimContainer(v)
	t := p.cfg.Targets
	if !inContainer && (t == nil || !t.Observed(int(v.Tgid))) {
		return nil
	}
	if p.victims == nil {
		p.victims = map[uint32]*victim{}
	}
	vi := p.victims[v.Tgid]
	if vi == nil {
		if len(p.victims) >= maxVictimsPerPeriod {
			p.rt.Lost(1)
			return nil
		}
		vi = &victim{tgid: v.Tgid, comm: bpfrt.CString(v.Comm[:]), containerID: cid}
		p.victims[v.Tgid] = vi
	}
	vi.kills++
	if p.cfg.Params.ReportEvent == 1 {
		e := event.New(p.now(), event.ProcOOMKill, strconv.Itoa(int(v.Tgid)), v.Tgid, vi.comm, v.OomScoreAdj)
		e.PID, e.Comm, e.ContainerID = int(v.Tgid), vi.comm, cid
		p.rt.Event(e)
	}
	return nil
}

// victimContainer finds the victim's container: from the identity cache
// (the process may still be there) or from the cgroups of the containers
// reported last period. inObserved says the container holds an observed
// process.
func (p *Probe) victimContainer(v oomOomVictim) (string, bool) {
	for id, c := range p.reported {
		for _, cg := range c.cgroups {
			if cg != 0 && (cg == v.MemcgId || cg == v.CgroupId) {
				return identity.ShortID(id), true
			}
		}
	}
	if proc, ok := p.ids.Process(int(v.Tgid)); ok && proc.ContainerID != "" {
		return identity.ShortID(proc.ContainerID), false
	}
	return "", false
}

// publishVictims writes the period's proc_oom rows and forgets them.
// Called with p.mu held.
func (p *Probe) publishVictims(now time.Time, period time.Duration) {
	tgids := make([]uint32, 0, len(p.victims))
	for tgid := range p.victims {
		tgids = append(tgids, tgid)
	}
	sort.Slice(tgids, func(i, j int) bool { return tgids[i] < tgids[j] })
	for _, tgid := range tgids {
		vi := p.victims[tgid]
		r := ProcOom.NewRecord(now, period)
		r.SetStr(oomTgid, strconv.Itoa(int(tgid)))
		r.SetStr(oomComm, vi.comm)
		if vi.containerID != "" {
			r.SetStr(oomContainer, vi.containerID)
		}
		r.SetNum(oomKills, float64(vi.kills))
		p.rt.Record(r)
	}
	p.victims = nil
}
