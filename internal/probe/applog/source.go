package applog

import (
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/logpattern"
	"github.com/galago-project/galago/internal/table"
)

// source is one container, unit or process whose logs are read: its
// patterns and its counts for the current period.
type source struct {
	key    sourceKey
	cl     *logpattern.Clusterer
	counts map[countKey]*count
	files  int // tracked files
}

type countKey struct {
	level   logpattern.Level
	pattern *logpattern.Pattern // nil: over the pattern cap
}

type count struct{ messages, lines uint64 }

// overflowID is the pattern key of the messages past the cap.
const overflowID = "overflow"

func (s *source) account(m logpattern.Message) {
	k := countKey{level: logpattern.DetectLevel(m.First), pattern: s.cl.Add(m.First)}
	c := s.counts[k]
	if c == nil {
		c = &count{}
		s.counts[k] = c
	}
	c.messages++
	c.lines += uint64(m.Lines)
}

// records turns the period's counts into app_log rows and clears them.
func (s *source) records(end time.Time, period time.Duration) []*table.Record {
	out := make([]*table.Record, 0, len(s.counts))
	for k, c := range s.counts {
		r := AppLog.NewRecord(end, period)
		switch {
		case s.key.container != "":
			r.SetStr(fContainer, identity.ShortID(s.key.container))
		case s.key.unit != "":
			r.SetStr(fUnit, s.key.unit)
		default:
			r.SetStr(fTgid, strconv.Itoa(s.key.pid))
		}
		r.SetStr(fLevel, k.level.String())
		if k.pattern != nil {
			r.SetStr(fPattern, k.pattern.ID)
			r.SetStr(fTemplate, k.pattern.Template)
			r.SetStr(fSample, k.pattern.Sample)
		} else {
			r.SetStr(fPattern, overflowID)
		}
		r.SetNum(fMessages, float64(c.messages))
		r.SetNum(fLines, float64(c.lines))
		out = append(out, r)
	}
	clear(s.counts)
	return out
}
