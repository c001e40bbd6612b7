package container

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
)

func victimBytes(t *testing.T, v oomOomVictim) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := binary.Write(&b, binary.NativeEndian, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A victim of the selection is one proc_oom row and one event (with
// report_event=1); a victim outside it is neither; a short record is an
// error.
func TestHandleVictim(t *testing.T) {
	p := New(procfs.FS{}, fakeIDs{}, withInterval(time.Hour))
	rt := probetest.NewRuntime(t, probetest.DiscardGo())
	params := probe.DefaultParams()
	params.ReportEvent = 1
	p.rt, p.log = rt, rt.Logger()
	p.cfg = probe.Config{Params: params, Targets: probetest.NewTargets(snoop.Whitelist, 42)}
	v := oomOomVictim{Pid: 42, Tgid: 42, OomScoreAdj: 500}
	copy(v.Comm[:], []int8{'h', 'o', 'g'})
	if err := p.handleVictim(victimBytes(t, v)); err != nil {
		t.Fatal(err)
	}
	other := v
	other.Pid, other.Tgid = 43, 43
	if err := p.handleVictim(victimBytes(t, other)); err != nil {
		t.Fatal(err)
	}
	if err := p.handleVictim([]byte{1, 2, 3}); err == nil {
		t.Error("short record: no error")
	}
	p.publishVictims(time.Unix(100, 0), time.Second)
	recs, evs := rt.Take()
	if len(recs) != 1 || recs[0].Str("tgid") != "42" || recs[0].Str("comm") != "hog" || recs[0].Values[oomKills].Num != 1 {
		t.Fatalf("records %v", recs)
	}
	if len(evs) != 1 || evs[0].Message != "Process(PID:42, COMM:hog) killed by the OOM killer(oom_score_adj 500)." {
		t.Fatalf("events %+v", evs)
	}
}
