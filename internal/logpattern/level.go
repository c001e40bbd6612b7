package logpattern

// Level is a message's severity.
type Level uint8

const (
	LevelUnknown Level = iota
	LevelDebug
	LevelInfo
	LevelWarning
	LevelError
	LevelCritical
)

var levelNames = [...]string{"unknown", "debug", "info", "warning", "error", "critical"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "unknown"
}

// Levels lists every level, in severity order.
var Levels = []Level{LevelUnknown, LevelDebug, LevelInfo, LevelWarning, LevelError, LevelCritical}

// levelScan is how many leading bytes of a line DetectLevel looks at: the
// severity of a log line is written before its message.
const levelScan = 128

// levelWords maps lower-case words to levels.
var levelWords = map[string]Level{
	"trace": LevelDebug, "debug": LevelDebug, "dbg": LevelDebug, "dbug": LevelDebug, "verbose": LevelDebug,
	"info": LevelInfo, "inf": LevelInfo, "information": LevelInfo, "notice": LevelInfo,
	"warn": LevelWarning, "warning": LevelWarning, "wrn": LevelWarning,
	"error": LevelError, "err": LevelError, "eror": LevelError, "severe": LevelError,
	"fatal": LevelCritical, "critical": LevelCritical, "crit": LevelCritical, "panic": LevelCritical,
	"emerg": LevelCritical, "emergency": LevelCritical, "alert": LevelCritical,
}

// DetectLevel guesses the severity of a message from its first line: the
// first word among its leading bytes that names a level (TRACE, DEBUG,
// INFO, NOTICE, WARN, WARNING, ERROR, ERR, FATAL, CRITICAL, PANIC, ... in
// any case, alone or as a key=value or JSON value), klog's one-letter
// prefix (E1127 03:04:05.000000 ...), a Java exception class
// (...Exception:) or a Python traceback header.
func DetectLevel(line string) Level {
	if len(line) > levelScan {
		line = line[:levelScan]
	}
	if l, ok := klogLevel(line); ok {
		return l
	}
	var buf [16]byte
	for i := 0; i < len(line); {
		if !isLetter(line[i]) {
			i++
			continue
		}
		j := i
		for j < len(line) && isLetter(line[j]) {
			j++
		}
		// A word glued to digits or underscores (e.g. "err2", "info_x")
		// is an identifier, not a level.
		glued := (i > 0 && isIdent(line[i-1])) || (j < len(line) && isIdent(line[j]))
		w := line[i:j]
		if !glued && len(w) <= len(buf) {
			n := copy(buf[:], w)
			for k := 0; k < n; k++ {
				buf[k] |= 0x20
			}
			if l, ok := levelWords[string(buf[:n])]; ok {
				return l
			}
		}
		if w == "Traceback" || (len(w) > len("Exception") && w[len(w)-len("Exception"):] == "Exception") {
			return LevelError
		}
		i = j
	}
	return LevelUnknown
}

// klogLevel recognises klog/glog's header: one of IWEF then MMDD and a
// space.
func klogLevel(s string) (Level, bool) {
	if len(s) < 6 || s[5] != ' ' || !isDigits(s[1:5]) {
		return 0, false
	}
	switch s[0] {
	case 'I':
		return LevelInfo, true
	case 'W':
		return LevelWarning, true
	case 'E':
		return LevelError, true
	case 'F':
		return LevelCritical, true
	}
	return 0, false
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isIdent(c byte) bool  { return isDigit(c) || c == '_' }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return len(s) > 0
}
