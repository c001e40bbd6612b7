package ioprobe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// recSize is sizeof(struct io_err_rec), checked against the object by
// TestSpec.
const recSize = 40

// minorBits is the kernel's dev_t split (MINORBITS): major << 20 | minor.
const minorBits = 20

// Dev is a block device number.
type Dev struct{ Major, Minor uint32 }

func devOf(kdev uint32) Dev { return Dev{Major: kdev >> minorBits, Minor: kdev & (1<<minorBits - 1)} }

func (d Dev) kernel() uint32 { return d.Major<<minorBits | d.Minor }

// String is gala-gopher's entity id of a block device: <major>_<minor>.
func (d Dev) String() string { return fmt.Sprintf("%d_%d", d.Major, d.Minor) }

// Failure is one decoded struct io_err_rec: a failed completion.
type Failure struct {
	Disk    Dev
	DoneNs  uint64 // block_rq_complete, CLOCK_MONOTONIC ns
	PID     uint32
	Comm    string
	DataLen uint32
	Op      uint8
	Flags   uint8
	Status  uint8 // blk_status_t
}

// Offsets of struct io_err_rec's fields, checked against the generated
// type by TestSpec.
const (
	offDone    = 0
	offDev     = 8
	offPid     = 12
	offDataLen = 16
	offOp      = 20
	offFlags   = 21
	offStatus  = 22
	offComm    = 24
	commLen    = 16
)

// cString is a NUL-terminated kernel string (a comm) as valid UTF-8.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

// DecodeFailure parses one ring buffer record.
func DecodeFailure(raw []byte) (Failure, error) {
	if len(raw) < recSize {
		return Failure{}, fmt.Errorf("io: record of %d bytes, want %d", len(raw), recSize)
	}
	le := binary.LittleEndian
	f := Failure{
		Disk:    devOf(le.Uint32(raw[offDev:])),
		DoneNs:  le.Uint64(raw[offDone:]),
		PID:     le.Uint32(raw[offPid:]),
		DataLen: le.Uint32(raw[offDataLen:]),
		Op:      raw[offOp],
		Flags:   raw[offFlags],
		Status:  raw[offStatus],
	}
	if f.Status == 0 {
		return Failure{}, errors.New("io: failure record without an error status")
	}
	f.Comm = cString(raw[offComm : offComm+commLen])
	return f, nil
}

// REQ_OP_* values (include/linux/blk_types.h; stable kernel ABI of the
// block tracepoints' rwbs).
const (
	opRead        = 0
	opWrite       = 1
	opFlush       = 2
	opDiscard     = 3
	opSecureErase = 5
	opWriteZeroes = 9
)

// Rwbs is the kernel's blk_fill_rwbs text of a request, as the block
// tracepoints print it: F (preflush), then W/R/D/DE/F/N for the operation
// (WZ for write-zeroes, as blktrace), then F (FUA), A (readahead), S (sync),
// M (meta).
func Rwbs(op, flags uint8) string {
	var b strings.Builder
	if flags&uint8(ioIoReqFlagIO_F_PREFLUSH) != 0 {
		b.WriteByte('F')
	}
	switch op {
	case opWrite:
		b.WriteByte('W')
	case opWriteZeroes:
		b.WriteString("WZ")
	case opDiscard:
		b.WriteByte('D')
	case opSecureErase:
		b.WriteString("DE")
	case opFlush:
		b.WriteByte('F')
	case opRead:
		b.WriteByte('R')
	default:
		b.WriteByte('N')
	}
	if flags&uint8(ioIoReqFlagIO_F_FUA) != 0 {
		b.WriteByte('F')
	}
	if flags&uint8(ioIoReqFlagIO_F_RAHEAD) != 0 {
		b.WriteByte('A')
	}
	if flags&uint8(ioIoReqFlagIO_F_SYNC) != 0 {
		b.WriteByte('S')
	}
	if flags&uint8(ioIoReqFlagIO_F_META) != 0 {
		b.WriteByte('M')
	}
	return b.String()
}

// blkStatus is one blk_status_t: the errno the kernel turns it into
// (blk_status_to_errno) and its description (block/blk-core.c blk_errors).
type blkStatus struct {
	errno int
	desc  string
}

// blkStatuses are the kernel's blk_status_t values (include/linux/blk_types.h).
var blkStatuses = map[uint8]blkStatus{
	0:  {0, "OK"},
	1:  {-95, "operation not supported"},   // BLK_STS_NOTSUPP, EOPNOTSUPP
	2:  {-110, "timeout"},                  // BLK_STS_TIMEOUT, ETIMEDOUT
	3:  {-28, "critical space allocation"}, // BLK_STS_NOSPC, ENOSPC
	4:  {-67, "recoverable transport"},     // BLK_STS_TRANSPORT, ENOLINK
	5:  {-121, "critical target"},          // BLK_STS_TARGET, EREMOTEIO
	6:  {-52, "reservation conflict"},      // BLK_STS_RESV_CONFLICT (was NEXUS), EBADE
	7:  {-61, "critical medium"},           // BLK_STS_MEDIUM, ENODATA
	8:  {-84, "protection"},                // BLK_STS_PROTECTION, EILSEQ
	9:  {-12, "kernel resource"},           // BLK_STS_RESOURCE, ENOMEM
	10: {-5, "I/O error"},                  // BLK_STS_IOERR, EIO
	11: {-78, "dm internal retry"},         // BLK_STS_DM_REQUEUE, EREMCHG
	12: {-11, "nonblocking retry"},         // BLK_STS_AGAIN, EAGAIN
	13: {-16, "device resource"},           // BLK_STS_DEV_RESOURCE, EBUSY
	14: {-109, "open zones exceeded"},      // BLK_STS_ZONE_OPEN_RESOURCE, ETOOMANYREFS
	15: {-75, "active zones exceeded"},     // BLK_STS_ZONE_ACTIVE_RESOURCE, EOVERFLOW
	16: {-19, "device offline"},            // BLK_STS_OFFLINE, ENODEV
	17: {-62, "duration limit exceeded"},   // BLK_STS_DURATION_LIMIT, ETIME
	// BLK_STS_INVAL was 19 from 6.11 (leaving 18 unused) until a fix made
	// the codes consecutive again; both mean the same.
	18: {-22, "invalid"}, // BLK_STS_INVAL, EINVAL
	19: {-22, "invalid"}, // BLK_STS_INVAL before the renumbering
}

// statusOf maps a blk_status_t; unknown values are an I/O error to the
// kernel too (blk_status_to_errno).
func statusOf(s uint8) blkStatus {
	if st, ok := blkStatuses[s]; ok {
		return st
	}
	return blkStatus{-5, "UNKNOW"}
}
