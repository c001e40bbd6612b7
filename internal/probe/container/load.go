package container

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/galago-project/galago/internal/identity"
)

// Load average: every loadSample the probe counts the container's threads
// that are running, runnable (R) or in uninterruptible sleep (D), the
// tasks the kernel's load average and cAdvisor's cgroupstats reader count,
// and folds the count into an exponentially decaying mean with a 10 s time
// constant: avg = avg*e^(-dt/10s) + n*(1-e^(-dt/10s)). The first sample
// seeds the mean (cAdvisor starts from 0 and needs tens of seconds to
// converge).
const (
	loadSample = time.Second
	loadWindow = 10 * time.Second
)

type loadState struct {
	avg  float64
	last time.Time
}

// sampleLoad takes one load sample of every container that holds an
// observed process; containers no longer observed are forgotten.
func (p *Probe) sampleLoad(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.rt == nil {
		return
	}
	pids, err := p.observedPIDs()
	if err != nil {
		return // collect reports it
	}
	conts := p.containersOf(pids)
	if p.load == nil {
		p.load = map[string]*loadState{}
	}
	for id := range p.load {
		if _, ok := conts[id]; !ok {
			delete(p.load, id)
		}
	}
	if len(conts) == 0 {
		return
	}
	rd, err := newReader(p.fs)
	if err != nil {
		return
	}
	for id, pid := range conts {
		n, err := rd.loadOf(id, pid)
		if err != nil {
			if !gone(err) {
				p.warnOnce("load."+id, "container: cannot count a container's runnable threads", "container_id", id, "err", err)
			}
			continue
		}
		st := p.load[id]
		if st == nil {
			p.load[id] = &loadState{avg: float64(n), last: now}
			continue
		}
		dt := now.Sub(st.last)
		if dt <= 0 {
			continue
		}
		decay := math.Exp(-dt.Seconds() / loadWindow.Seconds())
		st.avg = st.avg*decay + float64(n)*(1-decay)
		st.last = now
	}
}

// loadOf counts the R and D threads of container cid's cgroup tree.
func (rd *reader) loadOf(cid string, pid int) (int, error) {
	b, err := os.ReadFile(rd.fs.Path(fmt.Sprintf("/proc/%d/cgroup", pid)))
	if err != nil {
		return 0, err
	}
	dirs := containerDirs(rd.mounts, identity.ParseCgroup(b), cid)
	dir := dirs.procsDir()
	if dir == "" {
		return 0, fmt.Errorf("pid %d is in no mounted cgroup hierarchy", pid)
	}
	tree, err := rd.fs.CgroupTree(dir, maxCgroupDirs)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range tree {
		tids, err := rd.fs.CgroupThreads(d, dir == dirs.v2)
		if err != nil {
			continue // removed while we walked
		}
		for _, tid := range tids {
			st, err := rd.fs.PIDStat(tid)
			if err != nil {
				continue // exited
			}
			if st.State == 'R' || st.State == 'D' {
				n++
			}
		}
	}
	return n, nil
}
