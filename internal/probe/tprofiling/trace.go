package tprofiling

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// traceEvent is one Chrome trace-event (the format chrome://tracing and
// Perfetto open): ts and dur in µs.
type traceEvent struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	TS    float64        `json:"ts"`
	Dur   *float64       `json:"dur,omitempty"`
	PID   uint32         `json:"pid"`
	TID   uint32         `json:"tid"`
	ID    string         `json:"id,omitempty"`
	Cname string         `json:"cname,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// clock turns CLOCK_MONOTONIC ns into wall-clock time: offset is
// realtime - monotonic, read once per batch.
type clock struct{ offset int64 }

func (c clock) wall(mono uint64) time.Time { return time.Unix(0, int64(mono)+c.offset) }

// us is mono as wall-clock µs since the epoch.
func (c clock) us(mono uint64) float64 { return float64(int64(mono)+c.offset) / 1e3 }

// attrs are an event's extended attributes, under the seed's names.
func (e *Event) attrs() map[string]any {
	a := map[string]any{}
	if e.FilePath != "" {
		a["file.path"] = e.FilePath
	}
	if c := e.SockConn(); c != "" {
		a["sock.conn"] = c
	}
	if e.FutexOp != "" {
		a["futex.op"] = e.FutexOp
	}
	switch e.Type {
	case "pthread_sync":
		a["lock.addr"] = "0x" + strconv.FormatUint(e.LockAddr, 16)
	case "python_gc":
		a["gc.generation"] = e.GCGen
		a["gc.collected"] = e.GCCollected
	case "oncpu_sample":
		a["cpu"] = e.CPU
	case "mem_glibc":
		a["mem.size"] = e.Bytes
	case "mem_usage":
		a["mem.rss"] = e.Bytes
	}
	if e.Stack != "" {
		a["func.stack"] = e.Stack
	}
	return a
}

// traceEvents converts events to trace events: oncpu as a "b"/"e" pair
// (gala-gopher's), the others as complete ("X") events, preceded by the
// process and thread names ("M") not in named yet (which is updated; a
// thread that renamed itself is named again, and viewers keep the last
// name). nextID numbers the oncpu pairs.
func traceEvents(evs []Event, c clock, procName func(tgid uint32) string, named map[uint64]string, nextID *uint64) []traceEvent {
	out := make([]traceEvent, 0, len(evs)+4)
	for i := range evs {
		e := &evs[i]
		if k := uint64(e.TGID) << 32; named[k] == "" {
			named[k] = "\x00"
			out = append(out, traceEvent{Name: "process_name", Ph: "M", PID: e.TGID, TID: e.TGID, Args: map[string]any{"name": procName(e.TGID)}})
		}
		if k := uint64(e.TGID)<<32 | uint64(e.PID); named[k] != e.Comm {
			named[k] = e.Comm
			out = append(out, traceEvent{Name: "thread_name", Ph: "M", PID: e.TGID, TID: e.PID, Args: map[string]any{"name": e.Comm}})
		}
		args := e.attrs()
		args["count"] = e.Count
		args["thread.name"] = e.Comm
		args["event.type"] = e.Type
		if e.Open {
			args["in_progress"] = true
		}
		if e.Type == "oncpu" {
			*nextID++
			id := fmt.Sprintf("0x%x", *nextID)
			out = append(out,
				traceEvent{Name: e.Name, Cat: "oncpu", Ph: "b", TS: c.us(e.Start), PID: e.TGID, TID: e.PID, ID: id, Cname: "good", Args: args},
				traceEvent{Name: e.Name, Cat: "oncpu", Ph: "e", TS: c.us(e.End()), PID: e.TGID, TID: e.PID, ID: id, Cname: "good"})
			continue
		}
		if e.Type == "mem_usage" {
			// A counter ("C"): the process's resident memory track.
			out = append(out, traceEvent{Name: "mem_usage", Cat: "mem_usage", Ph: "C", TS: c.us(e.Start), PID: e.TGID, TID: e.PID,
				Args: map[string]any{"mem.rss": e.Bytes}})
			continue
		}
		if e.Type == "oncpu_sample" {
			// A sample event ("P"), category sample, as gala-gopher's.
			out = append(out, traceEvent{Name: e.Name, Cat: "sample", Ph: "P", TS: c.us(e.Start), PID: e.TGID, TID: e.PID, Args: args})
			continue
		}
		// gala-gopher's categories: its own for offcpu, pthread_sync and
		// python_gc, syscall for the calls.
		cat := "syscall"
		switch e.Type {
		case "offcpu", "pthread_sync", "python_gc", "mem_glibc":
			cat = e.Type
		}
		d := float64(e.Dur) / 1e3
		out = append(out, traceEvent{Name: e.Name, Cat: cat, Ph: "X", TS: c.us(e.Start), Dur: &d, PID: e.TGID, TID: e.PID, Args: args})
	}
	return out
}

// traceJSON is a whole trace file's content.
func traceJSON(evs []traceEvent) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(traceHead)
	for i := range evs {
		if i > 0 {
			b.WriteString(",\n")
		}
		j, err := json.Marshal(&evs[i])
		if err != nil {
			return nil, err
		}
		b.Write(j)
	}
	b.WriteString(traceTail)
	return b.Bytes(), nil
}

const (
	traceHead = "{\"traceEvents\":[\n"
	traceTail = "\n]}\n"
	// maxFileSize rolls the local trace over to a new file.
	maxFileSize = 64 << 20
)

// traceFile is profiling_channel=local's output: Chrome trace JSON files
// <dir>/timeline-trace-<YYYYMMDDHHMM>.json, each a valid JSON document
// after every write (new events are written over the closing bracket),
// rolled over at maxFileSize. The directory and file are made at the
// first write, so a probe that observes nothing leaves nothing behind.
type traceFile struct {
	dir   string
	now   func() time.Time
	f     *os.File
	path  string
	size  int64
	empty bool
	named map[uint64]string
	next  uint64
}

// write appends events to the current file.
func (t *traceFile) write(evs []Event, c clock, procName func(uint32) string) error {
	if len(evs) == 0 {
		return nil
	}
	if t.f == nil {
		if err := t.open(); err != nil {
			return err
		}
	}
	tes := traceEvents(evs, c, procName, t.named, &t.next)
	var b bytes.Buffer
	for i := range tes {
		if !t.empty || i > 0 {
			b.WriteString(",\n")
		}
		j, err := json.Marshal(&tes[i])
		if err != nil {
			return err
		}
		b.Write(j)
	}
	b.WriteString(traceTail)
	off := t.size - int64(len(traceTail))
	if _, err := t.f.WriteAt(b.Bytes(), off); err != nil {
		return fmt.Errorf("tprofiling: write %s: %w", t.path, err)
	}
	t.size = off + int64(b.Len())
	t.empty = false
	if t.size >= maxFileSize {
		return t.close()
	}
	return nil
}

func (t *traceFile) open() error {
	if err := os.MkdirAll(t.dir, 0o750); err != nil {
		return fmt.Errorf("tprofiling: output_dir: %w", err)
	}
	base := "timeline-trace-" + t.now().Format("200601021504")
	for i := 0; ; i++ {
		name := base + ".json"
		if i > 0 {
			name = fmt.Sprintf("%s-%d.json", base, i)
		}
		path := filepath.Join(t.dir, name)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
		if errors.Is(err, fs.ErrExist) && i < 1000 {
			continue
		}
		if err != nil {
			return fmt.Errorf("tprofiling: create trace file: %w", err)
		}
		if _, err := f.WriteString(traceHead + traceTail); err != nil {
			f.Close()
			return fmt.Errorf("tprofiling: write %s: %w", path, err)
		}
		t.f, t.path, t.size, t.empty, t.named = f, path, int64(len(traceHead)+len(traceTail)), true, map[uint64]string{}
		return nil
	}
}

func (t *traceFile) close() error {
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}

// sortEvents orders events by start, then thread.
func sortEvents(evs []Event) {
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].Start != evs[j].Start {
			return evs[i].Start < evs[j].Start
		}
		return evs[i].PID < evs[j].PID
	})
}
