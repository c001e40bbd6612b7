package hotspot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The hsperfdata layout (HotSpot perfMemory.hpp, PerfDataPrologue and
// PerfDataEntry, version 2.0): a 32-byte prologue, then num_entries
// entries from entry_offset, each a header, a NUL-terminated name and
// its data.
const (
	perfMagic      = 0xcafec0c0
	prologueLen    = 32
	entryHeaderLen = 20
	// maxPerfData bounds the file read (the JVM's default is 32 KiB,
	// -XX:PerfDataMemorySize at most a few MiB).
	maxPerfData = 16 << 20
	// maxEntries bounds the entries parsed.
	maxEntries = 1 << 16
)

// errPerfData is the error of a file that is not valid hsperfdata.
var errPerfData = errors.New("hsperfdata")

// PerfData is the counters of one JVM: longs and strings by name.
type PerfData struct {
	Longs   map[string]int64
	Strings map[string]string
}

// ParsePerfData parses an hsperfdata file's bytes. Entries of other types
// (byte vectors of other kinds) are skipped; anything out of bounds is an
// error naming the entry.
func ParsePerfData(b []byte) (*PerfData, error) {
	if len(b) < prologueLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte prologue", errPerfData, len(b), prologueLen)
	}
	if m := binary.BigEndian.Uint32(b); m != perfMagic {
		return nil, fmt.Errorf("%w: magic %#x, want %#x", errPerfData, m, perfMagic)
	}
	var bo binary.ByteOrder = binary.BigEndian
	if b[4] == 1 {
		bo = binary.LittleEndian
	}
	if major := b[5]; major != 2 {
		return nil, fmt.Errorf("%w: version %d.%d, want 2.x", errPerfData, major, b[6])
	}
	if b[7] == 0 {
		return nil, fmt.Errorf("%w: not accessible yet (the JVM is starting)", errPerfData)
	}
	used := int(int32(bo.Uint32(b[8:])))
	off := int(int32(bo.Uint32(b[24:])))
	n := int(int32(bo.Uint32(b[28:])))
	if used > 0 && used < len(b) {
		b = b[:used]
	}
	if n < 0 || n > maxEntries || off < prologueLen || off > len(b) {
		return nil, fmt.Errorf("%w: entry offset %d, %d entries in %d bytes", errPerfData, off, n, len(b))
	}
	pd := &PerfData{Longs: map[string]int64{}, Strings: map[string]string{}}
	for i := range n {
		if off+entryHeaderLen > len(b) {
			return nil, fmt.Errorf("%w: entry %d at %d past the end (%d bytes)", errPerfData, i, off, len(b))
		}
		e := b[off:]
		length := int(int32(bo.Uint32(e)))
		nameOff := int(int32(bo.Uint32(e[4:])))
		vecLen := int(int32(bo.Uint32(e[8:])))
		typ := e[12]
		dataOff := int(int32(bo.Uint32(e[16:])))
		if length < entryHeaderLen || length > len(e) || nameOff < entryHeaderLen || nameOff >= length ||
			dataOff < nameOff || dataOff > length || vecLen < 0 {
			return nil, fmt.Errorf("%w: entry %d at %d: length %d, name at %d, data at %d", errPerfData, i, off, length, nameOff, dataOff)
		}
		e = e[:length]
		name := e[nameOff:dataOff]
		if z := bytes.IndexByte(name, 0); z >= 0 {
			name = name[:z]
		}
		data := e[dataOff:]
		switch {
		case typ == 'J' && vecLen == 0:
			if len(data) < 8 {
				return nil, fmt.Errorf("%w: entry %q: long of %d bytes", errPerfData, name, len(data))
			}
			pd.Longs[string(name)] = int64(bo.Uint64(data))
		case typ == 'B' && vecLen > 0:
			if vecLen < len(data) {
				data = data[:vecLen]
			}
			if z := bytes.IndexByte(data, 0); z >= 0 {
				data = data[:z]
			}
			pd.Strings[string(name)] = string(data)
		}
		off += length
	}
	return pd, nil
}

// FindPerfData returns the hsperfdata file of the JVM whose /proc/<pid>
// directory is proc and whose pid in its own namespace is nspid:
// /tmp/hsperfdata_<user>/<nspid> in its mount namespace (the user is the
// JVM's, named in its own /etc/passwd: any will do); "" when there is
// none (not a JVM, or run with -XX:-UsePerfData).
func FindPerfData(proc string, nspid int) string {
	matches, _ := filepath.Glob(filepath.Join(proc, "root", "tmp", "hsperfdata_*", strconv.Itoa(nspid)))
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}

// ReadPerfData reads and parses an hsperfdata file.
func ReadPerfData(path string) (*PerfData, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPerfData+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPerfData {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", path, errPerfData, maxPerfData)
	}
	pd, err := ParsePerfData(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pd, nil
}

// Started says the JVM finished initialising (it answers attach only
// then).
func (pd *PerfData) Started() bool { return pd.Longs["sun.rt.vmInitDoneTime"] != 0 }

// AttachEnabled says the JVM's attach mechanism is on: with
// -XX:+DisableAttachMechanism SIGQUIT would only print a thread dump on
// the JVM's stdout.
func (pd *PerfData) AttachEnabled() bool {
	return strings.HasPrefix(pd.Strings["sun.rt.jvmCapabilities"], "1")
}
